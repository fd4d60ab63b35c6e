// ember::train, the helpers a training loop is made of, in one include: progress bar,
// metrics CSV, SVG plots, run files and checkpoints, --device/--threads, BLEU and edit distance.
#pragma once

#include "train/bleu.h"
#include "train/device_option.h"
#include "train/edit_distance.h"
#include "train/metrics_log.h"
#include "train/progress_bar.h"
#include "train/run_files.h"
#include "train/svg_plot.h"
