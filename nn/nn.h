// Everything in ember::nn: modules, layers, attention and transformer blocks.
#pragma once

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional.h"
#include "nn/transformer_classifier.h"
#include "nn/transformer_layers.h"
#include "nn/unary_module.h"
