#!/usr/bin/env bash
# Checks that a compiled rung of the CPU kernels (core/cpu/kernels/rung.cpp, built once per
# instruction set) defines nothing under a name another rung's object could also define: every
# global or weak symbol must lie in the rung's own namespace, ember::cpu::isa_<rung>. A weak
# definition shared between rungs (an inline function, a template of the standard library) is
# deduplicated by the linker, which keeps one copy for every caller: an AVX2 copy would then run
# on a CPU without AVX2 (core/cpu/kernels/rung_namespace.h).
#
#   check_symbols.sh RUNG OBJECT
set -euo pipefail
rung="$1" object="$2"
[ -f "$object" ] || { echo "check_symbols: no object file $object"; exit 1; }
# nm's types: upper case are global (T code, D/B/R data, W/V weak), u a GNU unique object; lower
# case are local to the object, and harmless. DW.ref.__gxx_personality_v0 is the one pointer to
# the exception runtime that every object may carry, the same everywhere; type_info objects (which
# UndefinedBehaviorSanitizer emits for function types) are data, identical in every copy; clang's
# __clang_call_terminate is two calls, into the C++ runtime, and no vector code. Sanitizers' and
# coverage's generated symbols are per object by construction.
shared=$(nm --defined-only -C "$object" |
  awk '$2 ~ /^[A-Zu]$/ { $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
  grep -v -e "ember::cpu::isa_${rung}::" -e '^DW\.ref\.__gxx_personality' -e '^typeinfo ' -e '^__clang_call_terminate$' -e '^__odr_asan' -e '^__asan' -e '^__ubsan' -e '^__sancov' || true)
if [ -n "$shared" ]; then
  echo "check_symbols: the $rung rung's object defines symbols outside ember::cpu::isa_${rung}:"
  echo "$shared"
  exit 1
fi
echo "check_symbols: every global symbol of the $rung rung lies in ember::cpu::isa_${rung}"
