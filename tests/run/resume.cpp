// Interruption and resume: checkpoints at signals, bitwise the same
// outputs, damaged or foreign checkpoints refused.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

// A ring run of `samples` samples in chunks of 40, checkpointing after every
// chunk, with sweep axes and a recorded sample (so every output is made).
std::string resumable_toml(long samples, const std::string& top = "") {
  return top + ring_toml(samples, "chunk = 40\n") +
         "[output]\ncheckpoint_interval = 0.0\nrecord = [3]\nrecord_every = 500\n";
}

TEST(Resume, AnInterruptedRunResumesToBitwiseTheSameOutputs) {
  const Config c = config(resumable_toml(300));
  const fs::path whole = run_into(c, "whole");
  const std::string csv = slurp(whole / "results.csv"), npy = slurp(whole / "results.npy"),
                    sum = slurp(whole / "summary.json"), traj = slurp(whole / "trajectories.csv");
  ASSERT_GT(csv.size(), 1000u);
  EXPECT_FALSE(fs::exists(whole / "checkpoint.ukb")) << "a complete run removes its checkpoint";
  // Stop after 1, 3 and 7 chunks (40 samples each); resume with other
  // threads and chunk sizes, which do not change the results.
  for (long stop_after : {1L, 3L, 7L}) {
    SCOPED_TRACE("stop after " + std::to_string(stop_after) + " chunks");
    const fs::path dir = unique_path("part" + std::to_string(stop_after));
    fs::remove_all(dir);
    std::atomic<int> stop{0};
    long chunks = 0;
    const run::Outcome o = run::execute(
        c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = [&](long) { stop = ++chunks >= stop_after ? 1 : 0; }});
    ASSERT_TRUE(o.interrupted);
    EXPECT_EQ(o.done, 40 * stop_after);
    EXPECT_TRUE(fs::exists(dir / "checkpoint.ukb"));
    EXPECT_FALSE(fs::exists(dir / "results.csv")) << "an interrupted run writes only its checkpoint";
    const run::Checkpoint k = run::read_checkpoint(dir / "checkpoint.ukb");
    EXPECT_EQ(k.header.done, 40 * stop_after);
    Config again = c;
    again.threads = 2, again.chunk = 17 * stop_after;
    const run::Outcome r = run::execute(again, {.out_dir = dir.string(), .resume = true});
    EXPECT_FALSE(r.interrupted);
    EXPECT_EQ(slurp(dir / "results.csv"), csv);
    EXPECT_EQ(slurp(dir / "results.npy"), npy);
    EXPECT_EQ(slurp(dir / "summary.json"), sum);
    EXPECT_EQ(slurp(dir / "trajectories.csv"), traj);
    EXPECT_FALSE(fs::exists(dir / "checkpoint.ukb"));
  }
  // Interrupted twice: the second run continues the first checkpoint and
  // writes its own.
  const fs::path dir = unique_path("twice");
  fs::remove_all(dir);
  std::atomic<int> stop{0};
  const auto once = [&](long) { stop = 1; };
  EXPECT_TRUE(run::execute(c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = once}).interrupted);
  stop = 0;
  const run::Outcome second = run::execute(c, {.out_dir = dir.string(), .resume = true, .stop = &stop, .after_chunk = once});
  EXPECT_TRUE(second.interrupted);
  EXPECT_EQ(second.done, 80);
  run::execute(c, {.out_dir = dir.string(), .resume = true});
  EXPECT_EQ(slurp(dir / "results.csv"), csv);
}

TEST(Resume, AStopWhileTheRecordedSamplesRunKeepsACheckpointAndResumes) {
  // The recorded samples run first; a stop request there (here before the
  // run starts: seen after the first call of record_every steps) ends the
  // run with a checkpoint of nothing done, no trajectories.csv, and a resume
  // gives the files of an uninterrupted run.
  Config c = config(ring_toml(40) + "[output]\nrecord = [0, 5]\nrecord_every = 10\n");
  const fs::path whole = run_into(c, "rec_whole");
  const fs::path cut = unique_path("rec_cut");
  fs::remove_all(cut);
  std::atomic<int> stop{1};
  const run::Outcome o = run::execute(c, {.out_dir = cut.string(), .stop = &stop});
  EXPECT_TRUE(o.interrupted);
  EXPECT_EQ(o.done, 0);
  EXPECT_TRUE(fs::exists(cut / "checkpoint.ukb"));
  EXPECT_FALSE(fs::exists(cut / "trajectories.csv"));
  EXPECT_FALSE(fs::exists(cut / "results.csv"));
  run::execute(c, {.out_dir = cut.string(), .resume = true});
  for (const char* f : {"results.csv", "results.npy", "summary.json", "trajectories.csv"})
    EXPECT_EQ(slurp(cut / f), slurp(whole / f)) << f;
}

TEST(Resume, AnInterruptedAdaptiveRunResumesToBitwiseTheSameOutputs) {
  // dopri5 with trajectories at fixed times: stopped after 2 chunks of 40,
  // resumed with other threads and chunks, the files of the whole run.
  const Config c = config(ring_dopri5_toml(200, "chunk = 40\n") +
                          "[output]\ncheckpoint_interval = 0.0\nrecord = [3]\nrecord_dt = 0.25\n");
  const fs::path whole = run_into(c, "whole");
  const fs::path dir = unique_path("part");
  fs::remove_all(dir);
  std::atomic<int> stop{0};
  long chunks = 0;
  ASSERT_TRUE(run::execute(c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = [&](long) {
                             stop = ++chunks >= 2 ? 1 : 0;
                           }}).interrupted);
  Config again = c;
  again.threads = 2, again.chunk = 33;
  EXPECT_FALSE(run::execute(again, {.out_dir = dir.string(), .resume = true}).interrupted);
  for (const char* f : {"results.csv", "results.npy", "summary.json", "trajectories.csv"})
    EXPECT_EQ(slurp(dir / f), slurp(whole / f)) << f;
}

TEST(Resume, TheDemoConfigInterruptedAndResumedGivesTheSameResults) {
  Config c = run::load_config(std::string(UKB_SOURCE_DIR) + "/examples/ring_friction.toml");
  c.samples = 2000, c.chunk = 300, c.record = {0, 1};
  const std::string csv = slurp(run_into(c, "whole") / "results.csv");
  const fs::path dir = unique_path("part");
  fs::remove_all(dir);
  std::atomic<int> stop{0};
  long chunks = 0;
  const run::Outcome o =
      run::execute(c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = [&](long) { stop = ++chunks == 2 ? 1 : 0; }});
  ASSERT_TRUE(o.interrupted);
  EXPECT_EQ(o.done, 600);
  run::execute(c, {.out_dir = dir.string(), .resume = true});
  EXPECT_EQ(slurp(dir / "results.csv"), csv);
}

// Signals at random instants, by the CLI: SIGINT or SIGTERM finishes the
// chunk, writes the checkpoint and exits 130 / 143 saying how to continue;
// `ukb run --resume DIR` then gives the uninterrupted run's results.csv.
// The process is spawned directly (a shell would start a background job
// with SIGINT ignored), and each signal comes a random 0-0.3 s after its
// first checkpoint exists (checkpoint_interval = 0), so that it lands in the
// run whatever the machine's speed.
TEST(Resume, SignalsAtRandomInstantsThenResumeGiveTheSameResults) {
  const std::string cfg = unique_path("c.toml");
  // About 1 s in a Release build (a quarter of the samples under the
  // sanitizers, which run 10x slower).
  std::ofstream(cfg) << resumable_toml(sanitized ? 1000 : 4000, "threads = 1\n");
  const std::string whole = unique_path("whole");
  fs::remove_all(whole);
  ASSERT_EQ(run_cli("run " + cfg + " --out " + whole + " --quiet").code, 0);
  const std::string csv = slurp(fs::path(whole) / "results.csv");
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> delay_ms(0, 300);
  int interrupted = 0, trial = 0;
  for (int sig : {SIGINT, SIGTERM, SIGINT, SIGTERM}) {
    const std::string dir = unique_path("sig" + std::to_string(trial++));
    fs::remove_all(dir);
    const std::string err = unique_path("err.txt");
    std::vector<std::string> args = {UKB_CLI_PATH, "run", cfg, "--out", dir, "--quiet"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, UKB_CLI_PATH, &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    // Until the first checkpoint (or the end of the process).
    int status = 0;
    bool ended = false;
    while (!fs::exists(fs::path(dir) / "checkpoint.ukb") && !ended) {
      ended = waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const int ms = delay_ms(rng);
    if (!ended) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      kill(pid, sig);
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
    }
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << ": " << slurp(err);
    const int code = WEXITSTATUS(status);
    SCOPED_TRACE(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + " " + std::to_string(ms) +
                 " ms after the first checkpoint: exit " + std::to_string(code));
    if (code == 0) {  // finished before the signal came
      EXPECT_EQ(slurp(fs::path(dir) / "results.csv"), csv);
      continue;
    }
    ++interrupted;
    EXPECT_EQ(code, sig == SIGINT ? 130 : 143) << slurp(err);
    EXPECT_NE(slurp(err).find("continue with: ukb run --resume " + dir), std::string::npos) << slurp(err);
    EXPECT_NE(slurp(err).find("stopping: finishing the current chunk, then writing a checkpoint"), std::string::npos)
        << "the first signal says what it does: " << slurp(err);
    EXPECT_FALSE(fs::exists(fs::path(dir) / "results.csv"));
    const CliRun r = run_cli("run --resume " + dir + " --quiet");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(fs::path(dir) / "results.csv"), csv);
  }
  EXPECT_GE(interrupted, 2) << "guard: the signals land in the runs";
}

// FNV-1a 64 of a byte string, written here independently of the checkpoint
// code, to forge checkpoints whose checksum is right.
std::string fnv_trailer(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  char t[32];
  std::snprintf(t, sizeof t, "FNV1A64 %016llx\n", static_cast<unsigned long long>(h));
  return t;
}

// The trailer of checkpoints since FNV64WX: FNV-1a's step on the
// little-endian 64-bit words of the bytes (the last one zero-padded), then
// on the byte count, each step followed by h ^= h >> 32; written here
// independently of the checkpoint code.
std::string fnv_words_trailer(const std::string& bytes) {
  std::string b = bytes;
  b.resize((b.size() + 7) / 8 * 8, '\0');
  std::uint64_t h = 1469598103934665603ULL;
  auto word = [&](std::uint64_t w) {
    h = (h ^ w) * 1099511628211ULL;
    h ^= h >> 32;
  };
  for (std::size_t i = 0; i < b.size(); i += 8) {
    std::uint64_t w = 0;
    for (int k = 7; k >= 0; --k) w = (w << 8) | static_cast<unsigned char>(b[i + static_cast<std::size_t>(k)]);
    word(w);
  }
  word(bytes.size());
  char t[32];
  std::snprintf(t, sizeof t, "FNV64WX %016llx\n", static_cast<unsigned long long>(h));
  return t;
}

TEST(Resume, HangupAndCpuLimitSignalsStopWithACheckpointToo) {
  // SIGHUP (a closed terminal) and SIGXCPU (a CPU-time limit) as SIGTERM:
  // the chunk finishes, a checkpoint, exit 128 + the signal, the signal
  // named; the resumed run completes. SIGXCPU is sent twice (the kernel
  // repeats it): the second does not end the process.
  const std::string cfg = unique_path("hup.toml");
  std::ofstream(cfg) << ring_toml(40000, "chunk = 500\n") << "[output]\ncheckpoint_interval = 0.0\n";
  for (const auto& [name, kill] : {std::pair<std::string, std::string>{"SIGHUP", "kill -HUP $p"},
                                   {"SIGXCPU", "kill -XCPU $p; kill -XCPU $p"}}) {
    SCOPED_TRACE(name);
    const fs::path dir = unique_path("hup_" + name);
    fs::remove_all(dir);
    const CliRun r = run_cli("--version >/dev/null; { " + std::string(UKB_CLI_PATH) + " run " + cfg + " --out " +
                             dir.string() + " --quiet --threads 1 & p=$!; k=0; while [ ! -e " + dir.string() +
                             "/checkpoint.ukb ] && [ $k -lt 2400 ]; do sleep 0.02; k=$((k+1)); done; " + kill +
                             "; wait $p; }");
    EXPECT_EQ(r.code, name == "SIGHUP" ? 128 + SIGHUP : 128 + SIGXCPU) << r.err;
    EXPECT_NE(r.err.find("interrupted by " + name), std::string::npos) << r.err;
    ASSERT_TRUE(fs::exists(dir / "checkpoint.ukb"));
    EXPECT_EQ(run_cli("run --resume " + dir.string() + " --quiet").code, 0);
    EXPECT_TRUE(fs::exists(dir / "results.npy"));
  }
}

TEST(Resume, AnOutputDirectoryRemovedDuringTheRunIsAWriteError) {
  // The directory removed after the first checkpoint: the next one cannot
  // be written: exit 4 (a write error, not bad input), said so.
  const std::string cfg = unique_path("gone.toml");
  std::ofstream(cfg) << ring_toml(40000, "chunk = 500\n") << "[output]\ncheckpoint_interval = 0.0\n";
  const fs::path dir = unique_path("gone");
  fs::remove_all(dir);
  const CliRun r = run_cli("--version >/dev/null; { " + std::string(UKB_CLI_PATH) + " run " + cfg + " --out " +
                           dir.string() + " --quiet --threads 1 & p=$!; k=0; while [ ! -e " + dir.string() +
                           "/checkpoint.ukb ] && [ $k -lt 2400 ]; do sleep 0.02; k=$((k+1)); done; rm -rf " +
                           dir.string() + "; wait $p; }");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("the output directory '" + dir.string() + "' no longer exists"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was kept"), std::string::npos) << r.err;
}

TEST(Resume, ASignalBeforeTheRunStartsEndsItWithNothingWritten) {
  // SIGTERM while the config is read (a FIFO no one writes: its open
  // blocks, the kernel's wait_for_partner, after the handlers are set):
  // exit 143, said as a stop before the run started, not as
  // "finishing the current chunk" or a config that cannot be read; no
  // output directory made.
  const fs::path fifo = unique_path("fifo.toml"), dir = unique_path("early");
  fs::remove(fifo);
  fs::remove_all(dir);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CliRun r = run_cli("--version >/dev/null; { " + std::string(UKB_CLI_PATH) + " run " + fifo.string() +
                           " --out " + dir.string() + " --quiet & p=$!; k=0; while [ \"$(cat /proc/$p/wchan 2>/dev/null)\" "
                           "!= wait_for_partner ] && [ $k -lt 1000 ]; do sleep 0.01; k=$((k+1)); done; kill -TERM $p; "
                           "wait $p; }");
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("the run has not started"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("interrupted by SIGTERM before the run started; nothing was written"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("finishing the current chunk"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("cannot read"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir));
  fs::remove(fifo);
}

TEST(Resume, FnvWordsTellsTwoFlippedTopBitsApart) {
  // Words 0 and 5 of a buffer with their top bits flipped: FNV-1a's step on
  // whole words, (h ^ w) * P, carries a difference in bit 63 unchanged to
  // the end, so two such flips cancel; the checkpoints' checksum (the step,
  // then h ^= h >> 32) tells the buffers apart.
  std::vector<unsigned char> a(64), b;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(37 * i + 11);
  b = a;
  b[7] ^= 0x80;
  b[5 * 8 + 7] ^= 0x80;
  auto plain = [](const std::vector<unsigned char>& x) {
    std::uint64_t h = 1469598103934665603ULL;
    for (std::size_t i = 0; i < x.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, x.data() + i, 8);
      h = (h ^ w) * 1099511628211ULL;
    }
    return h;
  };
  EXPECT_EQ(plain(a), plain(b)) << "guard: the pattern defeats the plain word step";
  run::FnvWords fa, fb;
  fa.add(a.data(), a.size());
  fb.add(b.data(), 13);  // in pieces: the words straddle them
  fb.add(b.data() + 13, b.size() - 13);
  EXPECT_NE(fa.hex(), fb.hex());
  run::FnvWords fa2;
  fa2.add(a.data(), 13);
  fa2.add(a.data() + 13, a.size() - 13);
  EXPECT_EQ(fa.hex(), fa2.hex()) << "the same bytes in other pieces: the same sum";
}

TEST(Resume, DamagedForeignOrMismatchedCheckpointsAreRefused) {
  const std::string cfg = unique_path("c.toml"), dir = unique_path("o");
  std::ofstream(cfg) << resumable_toml(200);
  fs::remove_all(dir);
  {
    std::atomic<int> stop{0};
    const Config c = run::load_config(cfg);
    ASSERT_TRUE(run::execute(c, {.out_dir = dir, .stop = &stop, .after_chunk = [&](long) { stop = 1; }}).interrupted);
  }
  const fs::path file = fs::path(dir) / "checkpoint.ukb";
  const std::string good = slurp(file);
  ASSERT_GT(good.size(), 25u);
  EXPECT_EQ(good.substr(good.size() - 25), fnv_words_trailer(good.substr(0, good.size() - 25)));
  auto refused = [&](const std::string& what, const std::string& content, const std::string& args,
                     const std::vector<std::string>& expect) {
    SCOPED_TRACE(what);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.code, 2) << r.err;
    for (const std::string& e : expect) EXPECT_NE(r.err.find(e), std::string::npos) << r.err;
    EXPECT_EQ(slurp(file), content) << "a refused checkpoint is left as it was";
    EXPECT_FALSE(fs::exists(fs::path(dir) / "results.csv"));
  };
  const std::string resume = "run --resume " + dir + " --quiet";
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  refused("a flipped bit", flipped, resume, {file.string(), "corrupted (checksum mismatch)", "cannot be resumed"});
  // The top bits of two of the checksum's words flipped (words count from
  // the file's start; these two are in the body's last columns): FNV-1a's
  // multiply alone carries such differences only upwards, and two cancel
  // (FnvWordsTellsTwoFlippedTopBitsApart has the arithmetic).
  std::string negated = good;
  const std::size_t top = (good.size() - 25 - 400) / 8 * 8 + 7;
  negated[top] ^= static_cast<char>(0x80);
  negated[top - 320] ^= static_cast<char>(0x80);
  refused("two top bits flipped", negated, resume, {"corrupted (checksum mismatch)"});
  refused("truncated", good.substr(0, good.size() - 100), resume, {"truncated"});
  refused("empty", "", resume, {"not a ukb checkpoint"});
  refused("not a checkpoint", "model = \"bead_on_ring\"\n", resume, {"not a ukb checkpoint"});
  // Another version (the checksum is right: written by the format's writer).
  std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
  run::Checkpoint k = run::read_checkpoint(file);
  k.header.version = "0.0.9";
  run::write_checkpoint(file, k.header, k.cols, k.status);
  refused("another version", slurp(file), resume, {"written by ukb 0.0.9", "this is ukb"});
  // Forged headers with a right checksum: a huge sample count, a negative
  // one, a non-number (no allocation, no crash: exit 2).
  const std::string body = good.substr(0, good.size() - 25);
  auto forged = [&](const std::string& from, const std::string& to) {
    std::string b = body;
    const std::size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    b.replace(at, from.size(), to);
    // The header's length line must follow the header's new length.
    const std::size_t nl1 = b.find('\n'), nl2 = b.find('\n', nl1 + 1);
    const long hlen = std::stol(good.substr(nl1 + 1, nl2 - nl1 - 1)) + static_cast<long>(to.size()) -
                      static_cast<long>(from.size());
    b.replace(nl1 + 1, nl2 - nl1 - 1, std::to_string(hlen));
    return b + fnv_trailer(b);
  };
  refused("done = 1e15", forged("\"done\":40", "\"done\":1000000000000000"), resume,
          {"damaged (done > samples)"});
  refused("done = samples, 40 rows stored", forged("\"done\":40", "\"done\":200"), resume,
          {"size does not match its header"});
  refused("done = -1", forged("\"done\":40", "\"done\":-1"), resume, {"damaged (done)"});
  refused("done = 4.5", forged("\"done\":40", "\"done\":4.5"), resume, {"damaged (done)"});
  // Forged fields with a right checksum (the format's own writer): a status
  // code no run gives, a negative step count.
  {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
    run::Checkpoint f = run::read_checkpoint(file);
    f.status[3] = 77;
    run::write_checkpoint(file, f.header, f.cols, f.status);
    refused("status 77", slurp(file), resume, {"sample 3 has the invalid status code 77"});
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
    f = run::read_checkpoint(file);
    for (run::Column& c : f.cols)
      if (c.name == "steps") c.i[5] = -3;
    run::write_checkpoint(file, f.header, f.cols, f.status);
    refused("steps -3", slurp(file), resume, {"sample 5 has a negative count in column 'steps'"});
    // A stored input that is not what the config draws (results of other
    // inputs would be mixed in).
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
    f = run::read_checkpoint(file);
    bool forged_mu = false;
    for (run::Column& c : f.cols)
      if (c.name == "mu") c.d[7] = 0.25, forged_mu = true;
    ASSERT_TRUE(forged_mu);
    run::write_checkpoint(file, f.header, f.cols, f.status);
    refused("an altered input", slurp(file), resume,
            {"sample 7's 'mu' is 0.25 in the checkpoint, but the config draws", "the checkpoint was altered"});
  }
  // Another config, another backend.
  const std::string other = unique_path("other.toml");
  std::string text = resumable_toml(200);
  text.replace(text.find("seed = 7"), 8, "seed = 8");
  std::ofstream(other) << text;
  refused("another config", good, "run " + other + " --resume " + dir + " --quiet",
          {"belongs to another config", "seed: 7 in the checkpoint, 8 now"});
  refused("another backend", good, resume + " --backend reference",
          {"belongs to another config", "backend: \"cpu\" in the checkpoint, \"reference\" now"});
  // A fresh run into the directory would overwrite the checkpoint.
  refused("a fresh run over a checkpoint", good, "run " + cfg + " --out " + dir + " --quiet",
          {"holds the checkpoint of an unfinished run", "ukb run --resume " + dir});
  // Nothing to resume.
  const std::string empty = unique_path("empty");
  fs::create_directories(empty);
  const CliRun none = run_cli("run --resume " + empty + " --quiet");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("holds no checkpoint"), std::string::npos) << none.err;
  // The same with the config given (it used to be found after every sample
  // was drawn, as "cannot read the checkpoint"); nothing is created.
  const std::string nowhere = unique_path("nowhere");
  fs::remove_all(nowhere);
  const CliRun none_cfg = run_cli("run " + cfg + " --resume " + nowhere + " --quiet");
  EXPECT_EQ(none_cfg.code, 2);
  EXPECT_NE(none_cfg.err.find("--resume: '" + nowhere + "' holds no checkpoint"), std::string::npos) << none_cfg.err;
  EXPECT_FALSE(fs::exists(nowhere));
  // The good checkpoint still resumes.
  std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
  EXPECT_EQ(run_cli(resume).code, 0);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "results.csv"));
  // So does one of an earlier build, whose checksum is FNV-1a over the bytes,
  // to the same results.
  const std::string csv = slurp(fs::path(dir) / "results.csv");
  fs::remove(fs::path(dir) / "results.csv");
  std::ofstream(file, std::ios::binary | std::ios::trunc) << body + fnv_trailer(body);
  const CliRun earlier = run_cli(resume);
  EXPECT_EQ(earlier.code, 0) << earlier.err;
  EXPECT_EQ(slurp(fs::path(dir) / "results.csv"), csv);
}

}  // namespace
}  // namespace ukb::test
