//! What NVIDIA's `rdma-cuda` sample does, through the gdr agent instead of opening the node as root:
//! get the card's fd from the agent, allocate two CUDA surfaces as a Jetson app does (`cudaHostAlloc`
//! flags 0), fill them, pin both, copy source -> FPGA -> destination in one H2C2H, unpin, verify.
//!
//!   cargo run -p gdr-client --example rdma_cuda [CARD]
//!
//! The caller must be allowed by `[access]` in /etc/gdr/agent.toml.

use std::process::ExitCode;

use cudarc::driver::{CudaContext, sys};
use gdr_client::{Sink, Source};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdma_cuda: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let card: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let dev = gdr_client::Agent::system()
        .and_then(|a| a.open(card))
        .map_err(|e| e.to_string())?;
    let info = dev.abi_info().map_err(|e| e.to_string())?;
    println!(
        "card{card}: ABI {}.{}, FPGA RAM {} bytes",
        info.abi_version >> 16,
        info.abi_version & 0xffff,
        info.fpga_ram_size
    );
    // SAFETY: only tries to dlopen libcuda; never panics.
    if !unsafe { sys::is_culib_present() } {
        return Err("libcuda not found: this example needs the NVIDIA driver".into());
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("CUDA: {e:?}"))?;
    let words = (info.fpga_ram_size / 4) as usize;
    let bytes = info.fpga_ram_size;
    // SAFETY: flags 0 = cudaHostAllocDefault; both surfaces are written before they are read.
    let (mut src, mut dst) = unsafe {
        (
            ctx.alloc_pinned_with_flags::<u32>(words, 0)
                .map_err(|e| format!("{e:?}"))?,
            ctx.alloc_pinned_with_flags::<u32>(words, 0)
                .map_err(|e| format!("{e:?}"))?,
        )
    };
    let data = |i: usize| ((i / 1024) as u32) << 16 | (i % 1024) as u32;
    for (i, w) in src
        .as_mut_slice()
        .map_err(|e| format!("{e:?}"))?
        .iter_mut()
        .enumerate()
    {
        *w = data(i);
    }
    for (i, w) in dst
        .as_mut_slice()
        .map_err(|e| format!("{e:?}"))?
        .iter_mut()
        .enumerate()
    {
        *w = !data(i);
    }
    let (sp, dp) = (
        src.as_mut_ptr().map_err(|e| format!("{e:?}"))? as u64,
        dst.as_mut_ptr().map_err(|e| format!("{e:?}"))? as u64,
    );
    for p in [sp, dp] {
        let mut one: u32 = 1;
        // SAFETY: `p` is a live pinned allocation (UVA: host address = device address).
        let r = unsafe {
            sys::cuPointerSetAttribute(
                (&mut one as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                p,
            )
        };
        r.result().map_err(|e| format!("SYNC_MEMOPS: {e:?}"))?;
    }
    // Pinned until these guards drop, which is before the surfaces are freed, whatever happens.
    let ps = dev.pin(sp, bytes).map_err(|e| e.to_string())?;
    let pd = dev.pin(dp, bytes).map_err(|e| e.to_string())?;
    let t = dev.h2c2h(Source::Cuda(&ps), Sink::Cuda(&pd), bytes);
    drop((ps, pd));
    let t = t.map_err(|e| e.to_string())?;
    let out = dst.as_slice().map_err(|e| format!("{e:?}"))?;
    match out.iter().enumerate().find(|&(i, &w)| w != data(i)) {
        None => {
            println!(
                "{bytes} bytes CUDA -> FPGA -> CUDA in {} ns: data OK",
                t.dma_time_ns
            );
            Ok(())
        }
        Some((i, &w)) => Err(format!(
            "mismatch at offset {:#x}: expected {:#010x}, got {w:#010x}",
            i * 4,
            data(i)
        )),
    }
}
