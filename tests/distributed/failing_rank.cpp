// A data-parallel job in which rank 1 throws while rank 0 waits for it in an all_reduce: run by
// check_failing_rank.cmake, which expects the job to stop, non-zero, with rank 1's message, long
// before the collective's own timeout.
#include "ember.h"

int main() {
  using namespace ember;
  distributed::init();
  Tensor x = ones({4});
  distributed::all_reduce(x);  // both ranks reach this one
  if (distributed::rank() == 1) {
    // An error nobody catches: ember's terminate handler aborts the job with it.
    throw Error("rank 1's data loader failed on purpose");
  }
  distributed::all_reduce(x);  // rank 0 waits here for a partner that is gone
  return 0;
}
