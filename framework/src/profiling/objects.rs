//! The code this process has loaded, by object: the executable, each shared library, the vDSO,
//! with the address ranges of their executable segments (Linux's `dl_iterate_phdr`).
//!
//! Profiles symbolise only addresses in the executable. A shared library's address is named
//! `<library>+0x<offset>` instead: symbolising libc reads its separate debug file when the host
//! has one (`/usr/lib/debug/.build-id/…`, 30 MB of parsed DWARF on a Debian host with
//! `libc6-dbg`), so what a profile costs would depend on the host rather than on the profile.

/// One loaded object.
#[derive(Debug)]
struct Object {
    /// The file name, empty for the executable.
    name: String,
    /// Where it is loaded (offsets are from here).
    base: usize,
    /// Its executable segments.
    ranges: Vec<(usize, usize)>,
}

/// The objects loaded when [`LoadedCode::of_this_process`] looked.
#[derive(Debug, Default)]
pub struct LoadedCode {
    objects: Vec<Object>,
}

impl LoadedCode {
    /// The objects loaded now (none known on systems without `dl_iterate_phdr`).
    pub fn of_this_process() -> Self {
        LoadedCode {
            objects: loaded_objects(),
        }
    }

    /// Whether `address` is code of the executable itself (or the objects are unknown), i.e.
    /// whether a profile symbolises it.
    pub fn in_executable(&self, address: usize) -> bool {
        self.objects.is_empty()
            || self
                .object_of(address)
                .is_some_and(|object| object.name.is_empty())
    }

    /// The library holding `address` and the offset of `address` in it.
    pub(crate) fn library_of(&self, address: usize) -> Option<(&str, usize)> {
        self.object_of(address)
            .filter(|object| !object.name.is_empty())
            .map(|object| (object.name.as_str(), address - object.base))
    }

    /// The executable segments of the objects whose file name starts with one of `prefixes`.
    pub(crate) fn ranges_of(&self, prefixes: &[&str]) -> Vec<(usize, usize)> {
        self.objects
            .iter()
            .filter(|object| prefixes.iter().any(|p| object.name.starts_with(p)))
            .flat_map(|object| object.ranges.iter().copied())
            .collect()
    }

    fn object_of(&self, address: usize) -> Option<&Object> {
        self.objects.iter().find(|object| {
            object
                .ranges
                .iter()
                .any(|&(start, end)| (start..end).contains(&address))
        })
    }
}

#[cfg(target_os = "linux")]
fn loaded_objects() -> Vec<Object> {
    use std::ffi::CStr;

    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our `data`, a Vec.
        let (info, objects) = unsafe { (&*info, &mut *data.cast::<Vec<Object>>()) };
        let path = match info.dlpi_name.is_null() {
            true => String::new(),
            // SAFETY: a NUL-terminated name owned by the loader for the call.
            false => unsafe { CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned(),
        };
        let base = info.dlpi_addr as usize;
        let mut ranges = Vec::new();
        for i in 0..usize::from(info.dlpi_phnum) {
            // SAFETY: `dlpi_phdr` points at `dlpi_phnum` headers.
            let header = unsafe { &*info.dlpi_phdr.add(i) };
            if header.p_type == libc::PT_LOAD && header.p_flags & libc::PF_X != 0 {
                let start = base + header.p_vaddr as usize;
                ranges.push((start, start + header.p_memsz as usize));
            }
        }
        let name = path.rsplit('/').next().unwrap_or_default().to_string();
        // The executable comes first, with an empty name; the rest are named.
        if name.is_empty() && objects.iter().any(|o: &Object| o.name.is_empty()) {
            return 0;
        }
        objects.push(Object { name, base, ranges });
        0
    }
    let mut objects: Vec<Object> = Vec::new();
    // SAFETY: the callback only reads what the loader hands it and pushes to `objects`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut objects as *mut Vec<Object>).cast()) };
    objects
}

#[cfg(not(target_os = "linux"))]
fn loaded_objects() -> Vec<Object> {
    Vec::new()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn this_function_is_in_the_executable_and_libc_is_not() {
        let code = LoadedCode::of_this_process();
        let here = this_function_is_in_the_executable_and_libc_is_not as fn() as usize;
        assert!(code.in_executable(here));
        assert_eq!(code.library_of(here), None);
        // SAFETY: dlsym with a NUL-terminated name; the default search order.
        let getpid = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as usize;
        assert!(!code.in_executable(getpid), "libc's getpid");
        let (library, offset) = code.library_of(getpid).expect("in a library");
        assert!(library.starts_with("libc."), "{library}");
        assert!(offset > 0);
        assert!(!code.ranges_of(&["libc."]).is_empty());
    }
}
