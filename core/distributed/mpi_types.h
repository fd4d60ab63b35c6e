// ember's dtypes as MPI datatypes, and the MPI operation a sum of each dtype is.
#pragma once

#include <mpi.h>

#include "core/dtype.h"

namespace ember::distributed {

MPI_Datatype mpi_datatype(DType dtype);
// MPI_SUM for numbers; MPI_LOR for bool, whose sum ember defines as logical or.
MPI_Op mpi_sum(DType dtype);

}  // namespace ember::distributed
