// Totals over the ranks of a data-parallel job, for metrics each rank measured on its own share
// (an evaluation's summed loss and correct count): every rank gets the totals. In a program not
// started by mpirun the values come back as they are.
#pragma once

#include <vector>

namespace ember::train {

std::vector<double> sum_over_ranks(std::vector<double> values);

}  // namespace ember::train
