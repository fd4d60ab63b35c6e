// K-fold cross-validation over a training split, for choosing a setting (a learning rate, a
// fine-tuning factor) without looking at the test split:
//
//   for (int64_t fold = 0; fold < 5; ++fold) {
//     auto [train, validation] = datasets::cross_validation_fold(sentences, fold, 5);
//     ... train on `train`, measure on `validation` ...
//   }
//   // average the five measurements per setting; pick the best; then train on all of
//   // `sentences` and measure the test split once.
//
// Item i (in the given order) is validation in fold i % folds and trains in every other fold,
// so each item is held out exactly once over the folds. Interleaving rather than cutting
// blocks keeps each fold a mixture of whatever the order groups together (the sentiment data
// comes file by file: IMDb, then Amazon, then Yelp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace ember::datasets {

template <class Item>
struct FoldSplit {
  std::vector<Item> train;
  std::vector<Item> validation;
};

template <class Item>
FoldSplit<Item> cross_validation_fold(const std::vector<Item>& items, int64_t fold, int64_t folds) {
  EMBER_CHECK(folds >= 2, "cross_validation_fold: folds must be at least 2 (got {})", folds);
  EMBER_CHECK(fold >= 0 && fold < folds, "cross_validation_fold: fold {} is not one of 0..{}", fold, folds - 1);
  EMBER_CHECK(static_cast<int64_t>(items.size()) >= folds,
              "cross_validation_fold: {} items cannot fill {} folds", items.size(), folds);
  FoldSplit<Item> split;
  for (size_t i = 0; i < items.size(); ++i) {
    (static_cast<int64_t>(i) % folds == fold ? split.validation : split.train).push_back(items[i]);
  }
  return split;
}

}  // namespace ember::datasets
