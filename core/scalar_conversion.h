// Whether a scalar given as a double fits in an element type, by PyTorch's rule for checked
// conversions: a floating type takes inf and NaN but not a finite value beyond its largest; an
// integer type takes neither NaN nor inf nor a value outside its range. Ops check scalars here
// where they enter (full, fill_, clamp's bounds, masked_fill, arange, item), so a value the
// tensor cannot hold is refused instead of stored as inf or as undefined behaviour.
#pragma once

#include <string_view>

#include "core/dtype.h"

namespace ember {

// Whether `value` converts to `dtype` without overflow.
bool fits_in(double value, DType dtype);

// Throws "{op}: value {value} cannot be converted to {dtype} without overflow" unless it fits.
void check_fits(double value, DType dtype, std::string_view op);

// check_fits, and for int64 also that the value is an integer: ember has no type promotion, so
// a fraction given to an integer tensor would be cut silently.
void check_storable(double value, DType dtype, std::string_view op);

}  // namespace ember
