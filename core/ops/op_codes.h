// The enums that name the members of op families sharing one kernel table (unary, binary,
// extremum). They live apart from the ops' headers because those include fmt, and the CUDA
// kernels, compiled by nvcc (which cannot compile fmt), switch on the very same enums.
#pragma once

namespace ember {

// Predicates produce bool: IsFinite, IsNan.
enum class UnaryOp { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Erf, Gelu, GeluTanh, Sign,
                     IsFinite, IsNan };

// Predicates (Eq and after) produce bool.
enum class BinaryOp { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr };

// Which end of the order max-like reductions look for.
enum class Extremum { Max, Min };

}  // namespace ember
