// device_backend_test.cc: OpenDeviceBackend — the STRATA_DEVICE override, bad
// values, and what kAuto picks (and says) on this machine.
#include "tiers/device/device_backend.h"

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "strata/options.h"

namespace strata {
namespace {

// Sets STRATA_DEVICE for one test and restores the caller's value after.
class ScopedDeviceEnv {
 public:
  explicit ScopedDeviceEnv(const char* value) {
    if (const char* old = std::getenv("STRATA_DEVICE")) old_ = old;
    if (value == nullptr) {
      unsetenv("STRATA_DEVICE");
    } else {
      setenv("STRATA_DEVICE", value, 1);
    }
  }
  ~ScopedDeviceEnv() {
    if (old_) {
      setenv("STRATA_DEVICE", old_->c_str(), 1);
    } else {
      unsetenv("STRATA_DEVICE");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(DeviceBackendTest, EnvPicksTheBackendUnderAuto) {
  ScopedDeviceEnv env("simulated");
  std::string why;
  auto device = OpenDeviceBackend(DeviceOptions(), &why);  // kAuto
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE((*device)->is_simulated());
  EXPECT_EQ((*device)->name(), "simulated");
  EXPECT_FALSE(why.empty());
}

TEST(DeviceBackendTest, ExplicitChoiceWinsOverEnv) {
  ScopedDeviceEnv env("cuda");
  DeviceOptions options;
  options.backend = DeviceBackendKind::kSimulated;
  auto device = OpenDeviceBackend(options);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE((*device)->is_simulated());
}

TEST(DeviceBackendTest, BadEnvValueIsInvalidArgument) {
  ScopedDeviceEnv env("tpu");
  auto device = OpenDeviceBackend(DeviceOptions());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(device.status().message().find("tpu"), std::string::npos);
}

TEST(DeviceBackendTest, SimulatedOptionNeedsNoEnv) {
  ScopedDeviceEnv env(nullptr);
  DeviceOptions options;
  options.backend = DeviceBackendKind::kSimulated;
  auto device = OpenDeviceBackend(options);
  ASSERT_TRUE(device.ok());
  EXPECT_TRUE((*device)->is_simulated());
}

TEST(DeviceBackendTest, AutoSaysWhatItPickedAndWhy) {
  ScopedDeviceEnv env(nullptr);
  std::string why;
  auto device = OpenDeviceBackend(DeviceOptions(), &why);
  ASSERT_TRUE(device.ok()) << device.status();
  if ((*device)->is_simulated()) {
    // No GPU here: the reason names the CUDA error or the missing build.
    EXPECT_TRUE(why.find("no CUDA device") != std::string::npos ||
                why.find("built without CUDA") != std::string::npos)
        << why;
  } else {
    EXPECT_EQ((*device)->name().rfind("cuda:", 0), 0u);
    EXPECT_NE(why.find("compute"), std::string::npos) << why;
  }
  std::cout << "kAuto: " << (*device)->name() << " (" << why << ")\n";
}

TEST(DeviceBackendTest, CudaWithoutAGpuIsFailedPrecondition) {
  ScopedDeviceEnv env(nullptr);
  DeviceOptions options;
  options.backend = DeviceBackendKind::kCuda;
  auto device = OpenDeviceBackend(options);
  if (device.ok()) GTEST_SKIP() << "a GPU answers: " << (*device)->name();
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition)
      << device.status();
  EXPECT_NE(device.status().message().find("no CUDA device"),
            std::string::npos);
}

}  // namespace
}  // namespace strata
