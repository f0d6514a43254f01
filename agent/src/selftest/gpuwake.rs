//! `gdr-selftest --gpu-wake [N]`: how fast a GPU reacts to a word written into pinned host memory, the
//! GPU's half of "the FPGA wrote a slot, the GPU consumes it" (docs/agent-gpu.md). A stream waits with
//! `cuStreamWaitValue32_v2` on a flag in `cuMemHostAlloc` memory, then writes an acknowledgement there with
//! `cuStreamWriteValue32_v2`; the CPU stores the flag and spins until it reads the acknowledgement. Three
//! round trips, N times each, as distributions:
//!
//! * **cpu**: the same store/spin between two CPU threads over the same pinned words: the method's floor;
//! * **wait+write**: the GPU's wait released by the store, then its write back;
//! * **wait+kernel+write**: as above with a verify kernel over 64 KiB of device memory between them
//!   (what a consumer that launches work per slot pays).

use std::fmt::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys};

use super::gpu::{Gpu, GpuError, unavailable};
use super::gpupaths::cuda_sym;

/// `cuStreamWaitValue32_v2` / `cuStreamWriteValue32_v2` (CUDA 11.7+, enabled by default; the v1 entry
/// points the 11.4 bindings have need a driver registry key and answer NOT_SUPPORTED without it).
type MemOp = unsafe extern "C" fn(sys::CUstream, sys::CUdeviceptr, u32, u32) -> sys::CUresult;

fn mem_op(name: &'static std::ffi::CStr) -> Result<MemOp, GpuError> {
    let p = cuda_sym(name);
    if p.is_null() {
        return Err(GpuError::Missing(name.to_str().unwrap_or("?")));
    }
    // SAFETY: both functions have this C signature in cuda.h
    // (CUresult (CUstream, CUdeviceptr, cuuint32_t, unsigned int)).
    Ok(unsafe { std::mem::transmute::<*mut std::ffi::c_void, MemOp>(p) })
}

/// `CU_STREAM_WAIT_VALUE_GEQ`.
const WAIT_GEQ: u32 = 0;
/// Words between the flag and the acknowledgement (separate cache lines).
const ACK: usize = 32;

fn cu(call: &'static str, r: sys::CUresult) -> Result<(), GpuError> {
    super::gpu::cu(call, r.result())
}

/// P50, P99, P99.9 and max of `v` (sorted here), in microseconds.
fn dist(v: &mut [Duration]) -> String {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e6;
    format!(
        "P50 {:7.2}  P99 {:7.2}  P99.9 {:7.2}  max {:8.2} us",
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    )
}

/// Spins until `word` reads `want`; gives up after a second (a GPU that never answers).
fn spin_until(word: &AtomicU32, want: u32) -> Result<(), GpuError> {
    let start = Instant::now();
    while word.load(Ordering::Acquire) != want {
        if start.elapsed() > Duration::from_secs(1) {
            return Err(GpuError::Check(format!(
                "no acknowledgement {want} within 1 s"
            )));
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// Runs the benchmark with `n` round trips per variant; returns the report text.
pub fn run(n: usize) -> Result<String, GpuError> {
    if let Some(why) = unavailable() {
        return Err(why.into());
    }
    let g = Gpu::new()?;
    let mut mem_ops = 0;
    // SAFETY: a valid out pointer; device 0 exists.
    let _ = unsafe {
        sys::cuDeviceGetAttribute(
            &mut mem_ops,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS,
            0,
        )
    };
    let host = g.alloc_host(2 * ACK)?;
    let dptr = g.device_ptr(&host)?;
    let (flag_d, ack_d) = (dptr, dptr + (ACK * 4) as u64);
    // SAFETY: the buffer holds 2 * ACK words and lives to the end of this function; the GPU and this
    // process touch the words only through atomics/volatile stream memory operations.
    let (flag, ack) = unsafe {
        (
            AtomicU32::from_ptr(host.ptr),
            AtomicU32::from_ptr(host.ptr.add(ACK)),
        )
    };
    flag.store(0, Ordering::SeqCst);
    ack.store(0, Ordering::SeqCst);
    let words = 16 * 1024;
    let dev = g.alloc_device(words)?;
    let stream =
        result::stream::create(result::stream::StreamKind::NonBlocking).map_err(|source| {
            GpuError::Driver {
                call: "cuStreamCreate",
                source,
            }
        })?;

    let wait = mem_op(c"cuStreamWaitValue32_v2")?;
    let write = mem_op(c"cuStreamWriteValue32_v2")?;
    let mut r = String::new();
    let _ = writeln!(
        r,
        "GPU: {}; CAN_USE_STREAM_MEM_OPS (v1) {mem_ops}; {n} round trips each, CPU store -> reaction -> CPU sees it",
        g.name
    );

    // The floor: two CPU threads over the same pinned words.
    let mut cpu = Vec::with_capacity(n);
    std::thread::scope(|s| -> Result<(), GpuError> {
        let peer = s.spawn(|| -> Result<(), GpuError> {
            for i in 1..=n as u32 {
                spin_until(flag, i)?;
                ack.store(i, Ordering::Release);
            }
            Ok(())
        });
        for i in 1..=n as u32 {
            let t = Instant::now();
            flag.store(i, Ordering::Release);
            spin_until(ack, i)?;
            cpu.push(t.elapsed());
        }
        peer.join()
            .map_err(|_| GpuError::Check("the peer thread panicked".into()))?
    })?;
    let _ = writeln!(r, "cpu thread            {}", dist(&mut cpu));

    let mut base = n as u32;
    for with_kernel in [false, true] {
        let mut v = Vec::with_capacity(n);
        for k in 1..=n as u32 {
            let i = base + k;
            // SAFETY: `stream` is live; the addresses are device views of the live pinned words.
            cu("cuStreamWaitValue32", unsafe {
                wait(stream, flag_d, i, WAIT_GEQ)
            })?;
            if with_kernel {
                // SAFETY: `stream` is live and `dev` holds `words` words until the end of the process.
                unsafe { g.verify_on(stream, dev, words as u32)? };
            }
            // SAFETY: as above.
            cu("cuStreamWriteValue32", unsafe {
                write(stream, ack_d, i, 0)
            })?;
            // Let the GPU reach the wait before the store, as a consumer waiting for the next slot does.
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(30) {
                std::hint::spin_loop();
            }
            let t = Instant::now();
            flag.store(i, Ordering::Release);
            spin_until(ack, i)?;
            v.push(t.elapsed());
        }
        base += n as u32;
        let name = if with_kernel {
            "wait+kernel+write"
        } else {
            "wait+write"
        };
        let _ = writeln!(r, "{name:<21} {}", dist(&mut v));
    }
    // SAFETY: `stream` is live.
    cu("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(stream)
    })?;
    Ok(r)
}
