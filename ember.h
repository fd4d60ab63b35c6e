// ember: the one header a user includes.
//
//   #include <ember.h>
//   using namespace ember;
//   Tensor w = randn({3, 2}, TensorOptions().requires_grad(true));
//   Tensor loss = matmul(ones({4, 3}), w).pow(2).mean();
//   loss.backward();
#pragma once

#include "core/autocast.h"
#include "core/autograd/activation_checkpoint.h"
#include "core/autograd/function.h"
#include "core/autograd/functional.h"
#include "core/autograd/grad.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/hooks.h"
#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/device.h"
#include "core/distributed/process_group.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/gradcheck.h"
#include "core/ops/attention.h"
#include "core/ops/copy.h"
#include "core/ops/cross_entropy.h"
#include "core/ops/dropout.h"
#include "core/ops/einsum.h"
#include "core/ops/elementwise.h"
#include "core/ops/embedding.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/inplace.h"
#include "core/ops/join.h"
#include "core/ops/layer_norm.h"
#include "core/ops/linear_cross_entropy.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/ops/sort.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"
#include "core/print.h"
#include "core/profiler.h"
#include "core/random.h"
#include "core/tensor.h"
#include "nn/nn.h"
#include "nn/data/datasets.h"  // the example data sets' readers, batching
#include "nn/text/text.h"      // tokenizers
#include "nn/train/train.h"    // progress bar, metrics, plots, checkpoints, BLEU
