import { defineScript, type CommandParser } from 'redis';

/**
 * Sliding-window log over several buckets, decided in one atomic script run.
 *
 * Each bucket is a sorted set of the requests it admitted (score = admission time in ms). A
 * request is admitted only if every bucket holds fewer than its limit within its window; then it
 * is recorded in all of them, otherwise in none (a refusal never spends another bucket's quota).
 * Redis runs a script alone, so concurrent callers on any number of processes cannot interleave
 * between the check and the write.
 *
 * KEYS[i]      one sorted set per bucket
 * ARGV[1]      now in ms; "" = the Redis server's clock (one clock for every API process)
 * ARGV[2]      member recorded on admission, unique per request
 * ARGV[3]      "1" = record when admitted, "0" = only look
 * ARGV[2+2i]   limit of bucket i
 * ARGV[3+2i]   window of bucket i, in ms
 *
 * Reply: { admitted (1|0), now, retryMs, refusedBy, remaining_1, resetMs_1, ..., remaining_n, resetMs_n }
 *   retryMs    when refused: ms until every refusing bucket has room again (the longest wait)
 *   refusedBy  when refused: 1-based index of the bucket with that longest wait; else 0
 *   remaining  requests the bucket still admits after this one
 *   resetMs    ms until the oldest request counted in the bucket leaves its window (0 if empty)
 */
export const SLIDING_WINDOW_LUA = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local member = ARGV[2]
local record = ARGV[3] == '1'
local n = #KEYS
local limits, windows, counts = {}, {}, {}
local admitted = 1
local retry = 0
local refusedBy = 0
for i = 1, n do
  local key = KEYS[i]
  local limit = tonumber(ARGV[2 + 2 * i])
  local window = tonumber(ARGV[3 + 2 * i])
  limits[i], windows[i] = limit, window
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  counts[i] = count
  if count >= limit then
    admitted = 0
    -- The bucket has room again once all but limit-1 of its entries have left the window.
    local freeing = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    local wait = tonumber(freeing[2]) + window - now
    if wait > retry then retry, refusedBy = wait, i end
  end
end
if admitted == 1 and record then
  for i = 1, n do
    redis.call('ZADD', KEYS[i], now, member)
    redis.call('PEXPIRE', KEYS[i], windows[i])
    counts[i] = counts[i] + 1
  end
end
local reply = { admitted, now, retry, refusedBy }
for i = 1, n do
  local remaining = limits[i] - counts[i]
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if counts[i] > 0 then
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    reset = tonumber(oldest[2]) + windows[i] - now
  end
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
end
return reply
`;

export interface ScriptBucket {
  key: string;
  limit: number;
  windowMs: number;
}

export interface ScriptArgs {
  buckets: readonly ScriptBucket[];
  /** ms since the epoch; undefined = Redis server time. */
  now: number | undefined;
  member: string;
  record: boolean;
}

/** Loaded once with SCRIPT LOAD and called by EVALSHA; node-redis falls back to EVAL on NOSCRIPT. */
export const slidingWindowScript = defineScript({
  SCRIPT: SLIDING_WINDOW_LUA,
  parseCommand(parser: CommandParser, args: ScriptArgs) {
    parser.push(String(args.buckets.length));
    parser.pushKeys(args.buckets.map((b) => b.key));
    parser.push(args.now === undefined ? '' : String(Math.floor(args.now)), args.member, args.record ? '1' : '0');
    for (const b of args.buckets) parser.push(String(b.limit), String(b.windowMs));
  },
  transformReply: undefined as unknown as () => number[],
});
