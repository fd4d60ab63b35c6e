// ember's dtypes as MPI datatypes (core/distributed/mpi_types.h).
#include "core/distributed/mpi_types.h"

namespace ember::distributed {

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool: return MPI_C_BOOL;  // ember's bool is C++'s: one byte, as C's _Bool
    // MPI has no 16-bit floating point type that its reductions would sum correctly.
    case DType::BFloat16:
    case DType::Float16: break;
  }
  fail("distributed: {} tensors have no MPI datatype; convert them with .to(kFloat32) first", dtype);
}

MPI_Op mpi_sum(DType dtype) { return dtype == DType::Bool ? MPI_LOR : MPI_SUM; }

}  // namespace ember::distributed
