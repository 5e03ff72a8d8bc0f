//! The CPU sampler (Linux): `SIGPROF` every 10 ms of the process's CPU time (`setitimer`'s
//! `ITIMER_PROF`, as Go's and pprof-rs's profilers), and a handler that walks the interrupted
//! thread's stack into one of a fixed number of preallocated slots. Nothing in the handler
//! allocates or locks: a slot is claimed with a compare-and-swap and published with a release
//! store, and a drain on an ordinary thread ([`Sampler::drain`]) empties the slots into its own
//! map. Memory is [`SLOTS`] slots of [`MAX_FRAMES`] addresses, allocated at start and freed at
//! stop; samples that find every slot full are counted, not kept.
//!
//! What the handler calls is async-signal-safe: atomics, `errno` saved and restored, and
//! libgcc's unwinder (`_Unwind_Backtrace` through `backtrace::trace_unsynchronized`, which
//! allocates nothing). The unwinder finds each frame's unwind table through glibc's
//! `_dl_find_object` (lock-free; glibc 2.35 and GCC 12 on) or else `dl_iterate_phdr`, whose
//! loader lock is recursive and never held by anything waiting on the handler, so a sample may
//! wait but not deadlock. As pprof-rs advises, a sample whose interrupted address is in libc,
//! libgcc, libpthread, the dynamic loader or the vDSO is not unwound (the interrupted code may
//! be halfway through changing what the unwinder reads, and the vDSO's unwind tables are
//! unreliable): it is counted as skipped.
//!
//! The handler stays installed after the first profile and does nothing while none runs, so a
//! `SIGPROF` still pending when the timer stops never meets the default action (termination).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::profiling::objects::LoadedCode;

/// Go's `runtime.SetCPUProfileRate` default.
pub(super) const SAMPLES_PER_SECOND: u32 = 100;
/// Frames kept per sample (Go's `maxCPUProfStack`).
pub(super) const MAX_FRAMES: usize = 64;
/// Samples held between drains: 5 s of 100 busy threads at 100 Hz if drained every 50 ms.
pub(super) const SLOTS: usize = 512;
/// Frames the unwinder may report above the interrupted one (the handler's own, the trampoline).
const HANDLER_FRAMES: usize = 16;

/// File-name prefixes of the shared objects whose code is not unwound from a signal handler
/// (pprof-rs's advice), and the vDSO's name.
const BLOCKLIST: [&str; 5] = ["libc.", "libgcc", "libpthread", "ld-linux", "linux-vdso"];

const FREE: u8 = 0;
const WRITING: u8 = 1;
const FULL: u8 = 2;

/// One sample: the interrupted address first, then return addresses outwards.
struct Slot {
    state: AtomicU8,
    len: UnsafeCell<usize>,
    frames: UnsafeCell<[usize; MAX_FRAMES]>,
}

/// What the handler writes into; shared with it through [`ACTIVE`].
pub(super) struct Sampler {
    slots: Box<[Slot]>,
    /// Where the next sample starts looking for a free slot.
    next: AtomicUsize,
    /// Samples that found every slot full.
    overflowed: AtomicU64,
    /// Samples interrupted in blocklisted code.
    skipped: AtomicU64,
    /// Executable address ranges of the blocklisted objects.
    blocked: Vec<(usize, usize)>,
}

// The slots' cells are written only by the one who moved the slot from FREE to WRITING, and read
// only by the drain after it saw FULL (acquire), so sharing them is sound.
unsafe impl Sync for Sampler {}

/// The running sampler, or null.
static ACTIVE: AtomicPtr<Sampler> = AtomicPtr::new(std::ptr::null_mut());
/// Handlers between reading [`ACTIVE`] and finishing with what it pointed at.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// Whether [`on_sigprof`] is the `SIGPROF` handler.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Why sampling could not start.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    /// The system refused the handler or the timer.
    #[error("{call} failed: {error}")]
    Os {
        /// The call.
        call: &'static str,
        /// What the system said.
        error: std::io::Error,
    },
}

/// Samples until dropped; at most one exists at a time (the caller serialises profiles).
pub(super) struct Running {
    sampler: *mut Sampler,
}

// The pointer is owned by `Running` and only read through shared references.
unsafe impl Send for Running {}

impl Running {
    /// Installs the handler (once per process), allocates the slots and starts the timer.
    pub(super) fn start() -> Result<Self, StartError> {
        if !INSTALLED.load(Ordering::Acquire) {
            install_handler()?;
            INSTALLED.store(true, Ordering::Release);
        }
        let slots = (0..SLOTS)
            .map(|_| Slot {
                state: AtomicU8::new(FREE),
                len: UnsafeCell::new(0),
                frames: UnsafeCell::new([0; MAX_FRAMES]),
            })
            .collect();
        let sampler = Box::into_raw(Box::new(Sampler {
            slots,
            next: AtomicUsize::new(0),
            overflowed: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            blocked: LoadedCode::of_this_process().ranges_of(&BLOCKLIST),
        }));
        ACTIVE.store(sampler, Ordering::SeqCst);
        let running = Running { sampler };
        set_timer(Duration::from_secs(1) / SAMPLES_PER_SECOND)?;
        Ok(running)
    }

    /// The sampler, for draining.
    pub(super) fn sampler(&self) -> &Sampler {
        // SAFETY: owned by `self` until drop, which waits for every handler to be done with it.
        unsafe { &*self.sampler }
    }

    /// Stops the timer; samples already taken stay to be drained.
    pub(super) fn stop_timer(&self) {
        let _ = set_timer(Duration::ZERO);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_timer();
        ACTIVE.store(std::ptr::null_mut(), Ordering::SeqCst);
        // A handler that saw the sampler counted itself in first (both SeqCst), so once the count
        // is zero no handler holds it.
        while IN_HANDLER.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        // SAFETY: made by `Box::into_raw` in `start`, and no handler can reach it any more.
        drop(unsafe { Box::from_raw(self.sampler) });
    }
}

impl Sampler {
    /// Hands every finished sample (interrupted address first) to `each`, freeing its slot.
    pub(super) fn drain(&self, mut each: impl FnMut(&[usize])) {
        for slot in self.slots.iter() {
            if slot.state.load(Ordering::Acquire) != FULL {
                continue;
            }
            // SAFETY: FULL means the writer is done and nobody writes until we free it.
            let (len, frames) = unsafe { (*slot.len.get(), &*slot.frames.get()) };
            each(&frames[..len.min(MAX_FRAMES)]);
            slot.state.store(FREE, Ordering::Release);
        }
    }

    /// Samples lost because every slot was full, and samples not unwound (blocklisted code).
    pub(super) fn lost(&self) -> (u64, u64) {
        (
            self.overflowed.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
        )
    }

    /// Takes a free slot, or `None` when all are full.
    fn claim(&self) -> Option<&Slot> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..SLOTS)
            .map(|i| &self.slots[(start + i) % SLOTS])
            .find(|slot| {
                slot.state
                    .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
    }

    fn blocked(&self, address: usize) -> bool {
        self.blocked
            .iter()
            .any(|&(start, end)| (start..end).contains(&address))
    }

    /// One sample of the current thread, interrupted at `pc` (0 when unknown).
    fn sample(&self, pc: usize) {
        if pc != 0 && self.blocked(pc) {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut seen = [0usize; MAX_FRAMES + HANDLER_FRAMES];
        let mut n = 0;
        // SAFETY: walks this thread's stack without allocating or locking (libgcc's unwinder).
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                seen[n] = frame.ip() as usize;
                n += 1;
                n < seen.len()
            });
        }
        // Drop the handler's own frames: start at the interrupted address when it is found.
        let first = seen[..n.min(HANDLER_FRAMES)]
            .iter()
            .position(|&ip| ip == pc)
            .unwrap_or(0);
        let frames = &seen[first..n];
        let Some(slot) = self.claim() else {
            self.overflowed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let len = frames.len().min(MAX_FRAMES);
        // SAFETY: the slot is ours between WRITING and FULL.
        unsafe {
            (&mut *slot.frames.get())[..len].copy_from_slice(&frames[..len]);
            *slot.len.get() = len;
        }
        slot.state.store(FULL, Ordering::Release);
    }
}

extern "C" fn on_sigprof(_: libc::c_int, _: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: errno is thread-local; the handler must leave it as the interrupted code had it.
    let errno = unsafe { *libc::__errno_location() };
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    let sampler = ACTIVE.load(Ordering::SeqCst);
    if !sampler.is_null() {
        // SAFETY: `Running::drop` frees it only after this handler has counted itself out.
        unsafe { (*sampler).sample(interrupted_pc(context)) };
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The program counter the signal interrupted, from the handler's context; 0 when unknown.
fn interrupted_pc(context: *mut libc::c_void) -> usize {
    if context.is_null() {
        return 0;
    }
    let context = context.cast::<libc::ucontext_t>();
    // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler.
    #[cfg(target_arch = "x86_64")]
    let pc = unsafe { (*context).uc_mcontext.gregs[libc::REG_RIP as usize] as usize };
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    let pc = unsafe { (*context).uc_mcontext.pc as usize };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let pc = {
        let _ = context;
        0
    };
    pc
}

fn install_handler() -> Result<(), StartError> {
    // SAFETY: a zeroed sigaction is valid; the handler only touches atomics and its slot.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigprof as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
            return Err(os_error("sigaction(SIGPROF)"));
        }
    }
    Ok(())
}

/// `ITIMER_PROF` every `every`; zero stops it.
fn set_timer(every: Duration) -> Result<(), StartError> {
    let interval = libc::timeval {
        tv_sec: every.as_secs() as libc::time_t,
        tv_usec: libc::suseconds_t::from(every.subsec_micros() as i32),
    };
    let timer = libc::itimerval {
        it_interval: interval,
        it_value: interval,
    };
    // SAFETY: plain system call with a valid struct.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut()) } != 0 {
        return Err(os_error("setitimer(ITIMER_PROF)"));
    }
    Ok(())
}

fn os_error(call: &'static str) -> StartError {
    StartError::Os {
        call,
        error: std::io::Error::last_os_error(),
    }
}
