// SPDX-License-Identifier: GPL-2.0

//! The `compiler_builtins` crate every `no_std` crate links against. The kernel provides memcpy, memset
//! and memcmp; the only other helpers `core` reaches from the logic are 128-bit divisions, inside the
//! integer formatting of panic messages, which the panic handler never formats. They are defined here as
//! bugs, so that if anything ever called one it would end in the panic handler (BUG()), never in a wrong
//! result. Any other helper stays undefined and modpost refuses the module: such code does not belong here.

#![allow(internal_features)]
#![feature(compiler_builtins)]
#![compiler_builtins]
#![no_builtins]
#![no_std]

macro_rules! unreachable_helpers {
    ($($name:ident),*) => {
        $(
            #[doc(hidden)]
            #[no_mangle]
            pub extern "C" fn $name() -> ! {
                panic!(concat!(stringify!($name), " is not available in the kernel"));
            }
        )*
    };
}

unreachable_helpers!(__udivti3, __umodti3);
