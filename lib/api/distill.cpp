// The public distill() over the library's (distill/distill.h).
#include "nmt/distill.h"

#include "api/guard.h"
#include "core/device.h"
#include "distill/distill.h"

namespace nmt::api {

DistillResult distill(const DistillSpec& spec, const std::function<void(const std::string&)>& log,
                      const std::atomic<int>* stop) {
  return guarded([&] {
    DistillOptions o;
    o.teachers = spec.teachers;
    o.train_src = spec.train_src, o.train_tgt = spec.train_tgt;
    o.valid_src = spec.valid_src, o.valid_tgt = spec.valid_tgt;
    o.out = spec.out, o.config = spec.config;
    o.max_minutes = spec.max_minutes, o.resume = spec.resume;
    if (spec.original == "mix")
      o.original = OriginalTargets::Mix;
    else if (spec.original == "none")
      o.original = OriginalTargets::None;
    else if (spec.original != "auto")
      throw OptionError("{original}: auto, mix or none, not '" + spec.original + "'");
    o.pilot_minutes = spec.pilot_minutes, o.beam = spec.beam, o.drop_share = spec.drop_share;
    o.quantize = spec.quantize, o.seed = spec.seed;
    o.device = open_device(spec.device);
    DistillCallbacks cb;
    if (log)
      cb.log = [&log](const std::string& line) {
        log(name_options(line, [](const std::string& key) { return key; }));
      };
    cb.stop = stop;
    const nmt::DistillResult r = nmt::distill(o, cb);
    return DistillResult{r.interrupted, r.model_path};
  });
}

}  // namespace nmt::api
