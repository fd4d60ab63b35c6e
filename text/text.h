// ember::text, the tokenizers: include this one header to have them all.
#pragma once

#include "text/bpe.h"
#include "text/char_tokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocabulary.h"
#include "text/word_tokenizer.h"
#include "text/wordpiece.h"
#include "text/words.h"
