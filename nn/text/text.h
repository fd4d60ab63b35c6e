// ember::text, the tokenizers: include this one header to have them all.
#pragma once

#include "nn/text/bpe.h"
#include "nn/text/char_tokenizer.h"
#include "nn/text/gpt2_tokenizer.h"
#include "nn/text/tokenizer.h"
#include "nn/text/unicode.h"
#include "nn/text/vocabulary.h"
#include "nn/text/word_tokenizer.h"
#include "nn/text/wordpiece.h"
#include "nn/text/wordpiece_pruning.h"
#include "nn/text/words.h"
