// The public API's one way out: whatever the library throws becomes an
// nmt::api::Error with the option named by its key.
#pragma once

#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "nmt/error.h"
#include "train/options.h"

namespace nmt::api {

// A Translator or Scorer that was moved from holds nothing: using it is an
// Error, not a crash.
template <class Impl>
Impl& held(const std::unique_ptr<Impl>& impl, const char* what) {
  if (!impl)
    throw Error(Error::Kind::usage, "", std::string("this ") + what + " was moved from");
  return *impl;
}

template <class F>
auto guarded(F&& f) -> decltype(f()) {
  auto key = [](const std::string& k) { return k; };
  try {
    return f();
  } catch (const api::Error&) {
    throw;
  } catch (const nmt::Error& e) {
    const auto* input = dynamic_cast<const InputError*>(&e);
    const bool usage =
        dynamic_cast<const UsageError*>(&e) || dynamic_cast<const OptionError*>(&e);
    throw Error(usage ? Error::Kind::usage : input ? Error::Kind::input : Error::Kind::runtime,
                input ? input->option() : "", message_naming(e, key));
  } catch (const std::bad_alloc&) {
    throw Error(Error::Kind::runtime, "", "out of memory");
  }
}

}  // namespace nmt::api
