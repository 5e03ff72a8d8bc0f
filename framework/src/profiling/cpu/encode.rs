//! A CPU profile as Go's `runtime/pprof` writes one: a `perftools.profiles.Profile` with
//! `samples/count` and `cpu/nanoseconds` per stack, every address of the executable symbolised
//! (function, file, line, inlined frames) in this process, and a shared library's addresses
//! named `<library>+0x<offset>` ([`LoadedCode`]). Samples the sampler could not keep appear as
//! stacks of one pseudo-function each saying why, as Go shows its lost samples.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use pprof::protos::{Function, Line, Location, Profile, Sample, ValueType};

use super::stacks::Stacks;
use crate::profiling::objects::LoadedCode;

/// Samples the profile counts but has no stack for, by reason.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lost {
    /// Every sample slot was full (the drain fell behind).
    pub overflowed: u64,
    /// Interrupted in libc, libgcc, the dynamic loader or the vDSO, which are not unwound from a
    /// signal handler.
    pub skipped: u64,
    /// The profile's stack limit was reached.
    pub dropped: u64,
}

/// The profile of `stacks` (and `lost`), sampled every `period` from `start` for `elapsed`.
pub(super) fn profile(
    stacks: &Stacks,
    lost: Lost,
    period: Duration,
    start: SystemTime,
    elapsed: Duration,
) -> Profile {
    let period_ns = i64::try_from(period.as_nanos()).unwrap_or(i64::MAX);
    let mut table = Tables::new(LoadedCode::of_this_process());
    let mut sample = Vec::new();
    let value = |count: u64| {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        vec![count, count.saturating_mul(period_ns)]
    };
    for (stack, count) in stacks.iter() {
        let location_id = stack
            .iter()
            .enumerate()
            .map(|(depth, &address)| table.location(address, depth == 0))
            .collect();
        sample.push(Sample {
            location_id,
            value: value(count),
            ..Sample::default()
        });
    }
    for (count, reason) in [
        (lost.overflowed, "(lost: the sample buffer was full)"),
        (
            lost.skipped,
            "(not unwound: in libc, libgcc, the loader or the vDSO)",
        ),
        (
            lost.dropped,
            "(lost: the profile's stack limit was reached)",
        ),
    ] {
        if count > 0 {
            sample.push(Sample {
                location_id: vec![table.pseudo_location(reason)],
                value: value(count),
                ..Sample::default()
            });
        }
    }
    let sample_type = vec![
        table.value_type("samples", "count"),
        table.value_type("cpu", "nanoseconds"),
    ];
    let period_type = Some(table.value_type("cpu", "nanoseconds"));
    let since_epoch = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    Profile {
        sample_type,
        sample,
        location: table.locations,
        function: table.functions,
        string_table: table.strings,
        time_nanos: i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX),
        duration_nanos: i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX),
        period_type,
        period: period_ns,
        ..Profile::default()
    }
}

/// The profile's string, function and location tables, each entry made once.
struct Tables {
    code: LoadedCode,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<Function>,
    function_ids: HashMap<(i64, i64), u64>,
    locations: Vec<Location>,
    location_ids: HashMap<usize, u64>,
}

impl Tables {
    fn new(code: LoadedCode) -> Self {
        Tables {
            code,
            // The string table starts with the empty string.
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(id) = self.string_ids.get(s) {
            return *id;
        }
        let id = i64::try_from(self.strings.len()).unwrap_or(i64::MAX);
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> ValueType {
        ValueType {
            ty: self.string(ty),
            unit: self.string(unit),
        }
    }

    fn function(&mut self, name: &str, system_name: &str, file: &str) -> u64 {
        let (name, system_name, file) = (
            self.string(name),
            self.string(system_name),
            self.string(file),
        );
        if let Some(id) = self.function_ids.get(&(name, file)) {
            return *id;
        }
        let id = self.functions.len() as u64 + 1;
        self.functions.push(Function {
            id,
            name,
            system_name,
            filename: file,
            ..Function::default()
        });
        self.function_ids.insert((name, file), id);
        id
    }

    /// The location of a code address. A return address (every frame but the interrupted one)
    /// is symbolised one byte back, inside the call it returns from.
    fn location(&mut self, address: usize, interrupted: bool) -> u64 {
        let address = match interrupted {
            true => address,
            false => address.saturating_sub(1),
        };
        if let Some(id) = self.location_ids.get(&address) {
            return *id;
        }
        let library = self
            .code
            .library_of(address)
            .map(|(name, offset)| (name.to_string(), offset));
        if let Some((library, offset)) = library {
            let function_id = self.function(&format!("{library}+{offset:#x}"), "", &library);
            return self.push_location(
                address,
                vec![Line {
                    function_id,
                    line: 0,
                }],
            );
        }
        let mut line = Vec::new();
        // Innermost first, as pprof lists inlined frames. `resolve` looks up the byte before the
        // address it is given (it takes every address for a return address), so it is given the
        // next one.
        let next = address.saturating_add(1) as *mut std::ffi::c_void;
        backtrace::resolve(next, |symbol| {
            let (name, system_name) = match symbol.name() {
                Some(name) => (
                    format!("{name:#}"),
                    String::from_utf8_lossy(name.as_bytes()).into_owned(),
                ),
                None => (format!("{address:#x}"), String::new()),
            };
            let file = symbol
                .filename()
                .map(|f| f.display().to_string())
                .unwrap_or_default();
            let function_id = self.function(&name, &system_name, &file);
            line.push(Line {
                function_id,
                line: symbol.lineno().map_or(0, i64::from),
            });
        });
        if line.is_empty() {
            let function_id = self.function(&format!("{address:#x}"), "", "");
            line.push(Line {
                function_id,
                line: 0,
            });
        }
        self.push_location(address, line)
    }

    /// A location of its own for a pseudo-function named `name`.
    fn pseudo_location(&mut self, name: &str) -> u64 {
        let function_id = self.function(name, "", "");
        self.push_location(
            0,
            vec![Line {
                function_id,
                line: 0,
            }],
        )
    }

    fn push_location(&mut self, address: usize, line: Vec<Line>) -> u64 {
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            address: address as u64,
            line,
            ..Location::default()
        });
        if address != 0 {
            self.location_ids.insert(address, id);
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn here() -> usize {
        here as fn() -> usize as usize
    }

    #[test]
    fn stacks_become_symbolised_samples_and_lost_ones_say_why() {
        let mut stacks = Stacks::new(1 << 20);
        stacks.add(&[here(), here() + 1]);
        stacks.add(&[here(), here() + 1]);
        let lost = Lost {
            overflowed: 3,
            skipped: 0,
            dropped: 1,
        };
        let period = Duration::from_millis(10);
        let p = profile(
            &stacks,
            lost,
            period,
            SystemTime::now(),
            Duration::from_secs(1),
        );
        let name = |i: i64| p.string_table[usize::try_from(i).unwrap()].as_str();
        assert_eq!(name(p.sample_type[0].ty), "samples");
        assert_eq!(name(p.sample_type[1].unit), "nanoseconds");
        assert_eq!(p.sample.len(), 3, "one stack and two reasons");
        assert_eq!(p.sample[0].value, vec![2, 20_000_000]);
        let function = |location: u64| {
            let location = &p.location[usize::try_from(location - 1).unwrap()];
            name(p.function[usize::try_from(location.line[0].function_id - 1).unwrap()].name)
        };
        assert!(
            function(p.sample[0].location_id[0]).ends_with("here"),
            "{}",
            function(p.sample[0].location_id[0])
        );
        assert_eq!(p.sample[1].value, vec![3, 30_000_000]);
        assert!(function(p.sample[1].location_id[0]).contains("buffer was full"));
        assert!(function(p.sample[2].location_id[0]).contains("stack limit"));
        assert_eq!(p.duration_nanos, 1_000_000_000);
    }
}
