// ember::datasets in one include: the readers of the examples' data sets (with the splits of
// DATA.md) and batching.
#pragma once

#include "datasets/batch_schedule.h"
#include "datasets/batching.h"
#include "datasets/cmudict.h"
#include "datasets/data_files.h"
#include "datasets/de_en.h"
#include "datasets/moby_dick.h"
#include "datasets/sentiment.h"
