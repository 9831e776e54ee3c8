-- wrk script: every request carries its own pre-minted token (one per line in
-- TOKENS_FILE). Thread i of n takes lines i, i+n, i+2n, ... so no two
-- requests share a token unless the file runs out (then the run is marked).
local tokens_file = os.getenv("TOKENS_FILE")
local path = os.getenv("BENCH_PATH") or "/api/v3/viewer/accounts"
local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  tokens = {}
  n = 0
  if tokens_file and tokens_file ~= "" then
    local nthreads = tonumber(os.getenv("WRK_THREADS") or "1")
    local i = 0
    for line in io.lines(tokens_file) do
      if i % nthreads == (tid - 1) then
        n = n + 1
        tokens[n] = line
      end
      i = i + 1
    end
  end
  idx = 0
  wrapped = 0
end

function request()
  if n == 0 then
    return wrk.format("GET", path)
  end
  idx = idx + 1
  if idx > n then
    idx = 1
    wrapped = 1
  end
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. tokens[idx] })
end

function done(summary, latency, requests)
  local any_wrapped = 0
  for _, t in ipairs(threads) do
    if t:get("wrapped") == 1 then any_wrapped = 1 end
  end
  io.write(string.format(
    '{"requests":%d,"durationUs":%d,"non2xx":%d,"errors":%d,"p50Us":%d,"p90Us":%d,"p99Us":%d,"maxUs":%d,"meanUs":%.1f,"tokensWrapped":%d}\n',
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean, any_wrapped))
end
