-- Mixed learn/predict load for benchmarks/load.py (#15), one wrk thread per Lua state:
--
--   wrk -t1 -c32 -d10s -s benchmarks/load_mixed.lua http://127.0.0.1:8000 -- \
--       ROWS_FILE MODELS LEARN_FRACTION RUN_ID [RATE_PER_CONNECTION]
--
-- ROWS_FILE: one example a line, "<features JSON>\t<label JSON>". Every request picks a random
-- model u0..u(MODELS-1) and a random row; with probability LEARN_FRACTION it is a single-example
-- POST /learn with a new idempotency id ("RUN_ID-<thread>-<n>"), else POST /predict. Each request
-- names its model in X-Chorus-Model, so the deploy's nginx routes it by model.
-- RATE_PER_CONNECTION (requests/s, optional): each connection waits an exponentially
-- distributed pause (that mean) before each request: a paced load below capacity. Without it,
-- a closed loop (the next request as soon as the answer is in).
-- At the end one line "JSON {...}" with requests, seconds, p50/p90/p99 ms and error counts.

local rows = {}
local models, learn, run_id, mean_delay_ms = 1000, 0.8, "run", 0
local counter = 0
local threads = {}

function setup(thread)
  thread:set("thread_id", #threads + 1)
  threads[#threads + 1] = thread
end

function init(args)
  for line in io.lines(args[1]) do
    local x, y = line:match("^(.-)\t(.*)$")
    rows[#rows + 1] = {x, y}
  end
  models = tonumber(args[2])
  learn = tonumber(args[3])
  run_id = args[4]
  local rate = tonumber(args[5] or "0")
  if rate > 0 then mean_delay_ms = 1000 / rate end
  non200 = 0
  math.randomseed(thread_id * 7919 + os.time())
end

function delay()
  if mean_delay_ms == 0 then return 0 end
  return -mean_delay_ms * math.log(1 - math.random())
end

function request()
  local m = "u" .. math.random(0, models - 1)
  local row = rows[math.random(1, #rows)]
  local headers = {["Content-Type"] = "application/json", ["X-Chorus-Model"] = m}
  if math.random() < learn then
    counter = counter + 1
    local body = '{"model":"' .. m .. '","features":' .. row[1] .. ',"label":' .. row[2]
      .. ',"id":"' .. run_id .. "-" .. thread_id .. "-" .. counter .. '"}'
    return wrk.format("POST", "/learn", headers, body)
  end
  return wrk.format("POST", "/predict", headers,
                    '{"model":"' .. m .. '","features":' .. row[1] .. '}')
end

function response(status, headers, body)
  if status ~= 200 then non200 = non200 + 1 end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + (t:get("non200") or 0) end
  local e = summary.errors
  io.write(string.format(
    'JSON {"requests": %d, "seconds": %f, "p50_ms": %f, "p90_ms": %f, "p99_ms": %f, '
    .. '"socket_errors": %d, "non200": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    e.connect + e.read + e.write + e.timeout, bad))
end
