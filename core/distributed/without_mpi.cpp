// The process group of a build without MPI: a program that asks for it learns why it is missing.
// Compiled instead of mpi_process_group.cpp when CMake finds no MPI.
#include <cstdio>
#include <cstdlib>

#include "core/distributed/backend.h"

namespace ember::distributed {
namespace detail {

bool built_with_mpi() { return false; }
CollectiveBackend& mpi_backend() { require_backend(Backend::MPI); std::abort(); }
Bootstrap mpi_bootstrap() { require_backend(Backend::MPI); return {}; }
void check_same_on_every_rank(std::string_view, const Tensor&) { require_backend(Backend::MPI); }

}  // namespace detail

void init() { require_backend(Backend::MPI); }
bool is_initialized() { return false; }
int rank() { return 0; }
int world_size() { return 1; }
int local_rank() { return 0; }
void barrier() { require_backend(Backend::MPI); }

void abort(std::string_view message, int exit_code) {
  std::fprintf(stderr, "ember: %.*s\n", static_cast<int>(message.size()), message.data());
  std::_Exit(exit_code);
}

}  // namespace ember::distributed
