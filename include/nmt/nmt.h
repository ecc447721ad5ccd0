// nmt's public C++ API: translate, score, train and distill as the `nmt` command
// does, from any program (link libnmt: find_package(nmt), then nmt::nmt).
#pragma once

#include "nmt/distill.h"
#include "nmt/error.h"
#include "nmt/metrics.h"
#include "nmt/scorer.h"
#include "nmt/train.h"
#include "nmt/translator.h"
