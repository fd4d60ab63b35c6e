// <immintrin.h>, for the CPU kernels that use x86 vector intrinsics (core/cpu/kernels/, compiled per
// instruction set). Every such header includes it through this one: GCC 12 warns, wrongly,
// that its own intrinsics read an uninitialised vector (its bug 105593), and since whichever
// header includes immintrin.h first decides what is warned, all must silence it alike.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning, which clang would call unknown
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
