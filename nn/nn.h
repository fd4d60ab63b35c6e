// Everything in ember::nn: modules, layers, attention, transformer blocks, losses, optimizers
// and learning-rate schedules.
#pragma once

#include "nn/activation.h"
#include "nn/adam.h"
#include "nn/attention.h"
#include "nn/clip_grad.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/losses.h"
#include "nn/lr_schedule.h"
#include "nn/module.h"
#include "nn/optimizer.h"
#include "nn/positional.h"
#include "nn/sgd.h"
#include "nn/transformer_classifier.h"
#include "nn/transformer_layers.h"
#include "nn/unary_module.h"
