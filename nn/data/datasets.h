// ember::datasets in one include: the readers of the examples' data sets (with the splits of
// DATA.md) and batching.
#pragma once

#include "nn/data/batch_schedule.h"
#include "nn/data/batching.h"
#include "nn/data/cmudict.h"
#include "nn/data/cross_validation.h"
#include "nn/data/data_files.h"
#include "nn/data/de_en.h"
#include "nn/data/distributed_sampler.h"
#include "nn/data/masked_lm.h"
#include "nn/data/moby_dick.h"
#include "nn/data/sentiment.h"
#include "nn/data/sotu.h"
#include "nn/data/word_polarity.h"
