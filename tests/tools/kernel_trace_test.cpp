// tools/kernel_trace.py (the summary of a libkernel_trace.so timeline) on a hand-made timeline whose busy time,
// gaps and their causes are known: the numbers it prints are the ones the docs quote from real traces.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tool_test_util.h"

namespace anvil::test {
namespace {

bool has_python() { return python_has("csv"); }

// Four device operations (ns, one clock for host and device as CUPTI gives them): a kernel; a second one 1 us
// later, whose launch had returned long before (a device-side gap); a copy 30 us after that, whose call returned
// after the device went idle (the host was late); a kernel right behind it. Busy 29 us of a 60 us window.
std::string timeline(const TempDir& dir) {
  const std::string path = dir.file("trace.csv");
  std::ofstream(path) << "kind,start_ns,end_ns,stream_or_thread,correlation,name\n"
                         "runtime,98000,99000,7,1,\"cudaLaunchKernel_v7000\"\n"
                         "runtime,99000,99500,7,2,\"cudaLaunchKernel_v7000\"\n"
                         "runtime,144000,145000,7,3,\"cudaMemcpyAsync_v3020\"\n"
                         "runtime,145000,146000,7,4,\"cudaLaunchKernel_v7000\"\n"
                         "kernel,100000,110000,13,1,\"void k_a<float, (int)4>(float*, int)\"\n"
                         "kernel,111000,120000,13,2,\"void k_b(float*)\"\n"
                         "memcpy,150000,151000,13,3,\"memcpy kind 1, 64 bytes\"\n"
                         "kernel,151000,160000,13,4,\"void k_a<float, (int)4>(float*, int)\"\n";
  return path;
}

std::string summary(const std::string& args) { return tool_output("kernel_trace.py", args); }

TEST(KernelTrace, BusyIdleAndGapCauses) {
  if (!has_python()) GTEST_SKIP() << "python3 not found";
  TempDir dir;
  const std::string path = timeline(dir);
  const std::string out = summary(path);
  EXPECT_NE(out.find("window 0.060 ms: 4 device operations, busy 0.029 ms (48.3%), idle 0.031 ms in 2 gaps "
                     "(host late: 0.030 ms; device side: 0.001 ms)"),
            std::string::npos)
      << out;
  // Kernel names lose their template arguments; k_a ran twice for 19 us.
  EXPECT_NE(out.find("| k_a<…> | 2 | 0.019 | 9.5 |"), std::string::npos) << out;
  // The largest gap is the host-late one, between the second kernel and the copy.
  EXPECT_NE(out.find("| 30.0 | 0.020 | yes | k_b | memcpy kind 1, 64 bytes |"), std::string::npos) << out;
  // A window of the last 15 us holds the copy and the last kernel only, back to back.
  EXPECT_NE(summary(path + " --last-ms 0.015").find("window 0.010 ms: 2 device operations, busy 0.010 ms (100.0%), "
                                                    "idle 0.000 ms in 0 gaps"),
            std::string::npos);
}

TEST(KernelTrace, RejectsAFileThatIsNotATrace) {
  if (!has_python()) GTEST_SKIP() << "python3 not found";
  TempDir dir;
  const std::string path = dir.file("other.csv");
  std::ofstream(path) << "a,b,c\n1,2,3\n";
  const std::string msg = tool_refusal(dir, "kernel_trace.py", path);
  EXPECT_NE(msg.find("expected a kernel_trace CSV (header 'kind,start_ns,...')"), std::string::npos) << msg;
}

}  // namespace
}  // namespace anvil::test
