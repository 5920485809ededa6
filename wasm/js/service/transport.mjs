// The service client's transport: one call sent as a POST of one JSON body,
// tried again (the same bytes, request id included) on the next coordinator
// after no answer or a 5xx, within the call's attempts, timeout and signal.
import { LeaseServiceError } from './errors.mjs';
import { parseError, parseReply, readBody } from './protocol.mjs';
import { durationText, MAX_TIMER_MILLIS, MIN_RETRY_MILLIS, sleep } from './timers.mjs';

export const MAX_ATTEMPTS = 100;

// Codes answered with a 5xx or a 429 that sending the same call again at once
// will not change: the coordinator (or the token's share of it) is full
// until some lease or wait ends, or it does not offer the call.
export const FINAL_CODES = new Set(['too_many_leases', 'too_many_token_leases', 'too_many_token_waiters', 'not_supported']);

// Statuses worth sending the same call again for, besides 5xx: the server
// timed the request out, or asks for fewer requests. Every other 4xx is
// final: the same call will be refused the same way.
export const RETRIED_4XX = new Set([408, 429]);

// The error codes (Node's, on the cause of fetch's TypeError, or on the
// error of node:https) of a TLS certificate that cannot be verified or does
// not name the host: a setting to fix, not a failure to retry. Browsers give
// no such detail (a failed handshake is a network error there, retried).
const CERTIFICATE_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_CRL', 'UNABLE_TO_DECRYPT_CERT_SIGNATURE', 'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY', 'CERT_SIGNATURE_FAILURE', 'CRL_SIGNATURE_FAILURE', 'CERT_NOT_YET_VALID', 'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID', 'CRL_HAS_EXPIRED', 'ERROR_IN_CERT_NOT_BEFORE_FIELD', 'ERROR_IN_CERT_NOT_AFTER_FIELD', 'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_CHAIN_TOO_LONG', 'CERT_REVOKED',
  'INVALID_CA', 'PATH_LENGTH_EXCEEDED', 'INVALID_PURPOSE', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_TLS_CERT_ALTNAME_FORMAT',
]);
const NAME_MISMATCH_CODES = new Set(['HOSTNAME_MISMATCH', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_TLS_CERT_ALTNAME_FORMAT']);

// An attempt of a call with an end (a renewal: the holder's deadline; the
// release a hold sends when it ends without release(): ENDING_RELEASE_MILLIS
// after the end) without an answer after this fraction of the time left to
// that end gets a hedge beside it (see hedged), so that one lost answer
// still leaves time for another attempt; never sooner than MIN_RETRY_MILLIS.
const ATTEMPT_FRACTION = 0.5;

/**
 * The settings a LeaseServiceClient sends its calls with: bases (its
 * coordinators' base URLs), cur (the index in bases of the coordinator that
 * answered last), fetch (what calls are sent with, fetch-shaped: a fetch,
 * or node-http.mjs's sender on Node), attempts, attemptTimeout, timeout (a call's, or
 * undefined), backoff, headers (of every request: the token's Authorization
 * among them), timers and clock (the holder's). Internal to the client,
 * which keeps it in a private field: its headers carry the token.
 */
export class Transport {
  constructor({ bases, fetch, attempts, attemptTimeout, timeout, backoff, headers, timers, clock }) {
    Object.assign(this, { bases, cur: 0, fetch, attempts, attemptTimeout, timeout, backoff, headers, timers, clock });
  }

  // send posts body to /v1/<op> until it gets an answer, a refusal that will
  // not change, runs out of attempts, or the call ends (signal, timeout).
  // waitMillis is how long the coordinator may keep the call open: each
  // attempt gets that on top of attemptTimeoutMillis. until (holder millis,
  // or a function that returns them) is when the call's answer stops being
  // of use: its attempts are then hedged (see hedged).
  async send(op, body, { signal, timeoutMillis = this.timeout, waitMillis = 0, until, attempts = this.attempts }) {
    const data = JSON.stringify(body);
    const k = this.bases.length;
    const start = this.cur;
    // call aborts when the caller's signal does or the call's time is up;
    // its reason is what the call rejects with.
    const call = new AbortController();
    const onAbort = () => call.abort(signal.reason);
    let n = 0; // attempts sent
    let last; // the failure of the last attempt
    let timer;
    if (signal) {
      if (signal.aborted) throw signal.reason;
      signal.addEventListener('abort', onAbort, { once: true });
    }
    if (timeoutMillis !== undefined) {
      timer = this.timers.setTimeout(() => call.abort(new LeaseServiceError(`lease-fence: ${op} timed out after ${timeoutMillis} ms`, { code: 'timeout', attempts: n })),
        Math.min(timeoutMillis, MAX_TIMER_MILLIS));
    }
    try {
      if (until !== undefined) return await this.hedged(op, data, call.signal, { until, waitMillis, attempts });
      while (n < attempts) {
        // Each attempt goes to the next coordinator; only one that returns
        // to a coordinator this call already tried waits for the backoff
        // (the pause of the back-th retry of a client with one URL).
        const back = n + 1 - k;
        if (back >= 1) {
          const pause = this.backoff(back + 1);
          if (pause > 0) await sleep(this.timers, pause, call.signal);
        }
        // The call may have ended between the pause's end and this
        // continuation (timers that fire together, an abort in a microtask).
        if (call.signal.aborted) throw call.signal.reason;
        const i = (start + n) % k;
        n++;
        const outcome = await this.attempt(op, this.bases[i], data, call.signal, n, this.attemptTimeout + waitMillis);
        if (call.signal.aborted) throw call.signal.reason;
        if (outcome.reply) {
          this.cur = i;
          return outcome.reply;
        }
        if (outcome.final) throw outcome.final;
        last = outcome.error;
      }
    } catch (e) {
      throw call.signal.aborted ? call.signal.reason : e;
    } finally {
      if (timer !== undefined) this.timers.clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
    if (last instanceof LeaseServiceError) {
      last.attempts = n;
      throw last;
    }
    throw new LeaseServiceError(`lease-fence: ${op} got no answer after ${n} attempts${lastFailure(last)}`, { code: 'no_answer', attempts: n, cause: last });
  }

  // hedged sends a call that has an end (until: holder millis, or a
  // function that returns them): an attempt without an answer after
  // ATTEMPT_FRACTION of the time left to until is not given up; another,
  // the same bytes, is sent beside it (a hedge), and so on while the call
  // lasts, at most `attempts` open at once (the oldest is given up for a
  // new one), and whichever answers first is taken. So a lost answer
  // leaves time for another attempt, and one that is merely slow still
  // counts. Failed attempts are sent again (after the backoff) while fewer
  // than `attempts` have failed.
  hedged(op, data, signal, { until, waitMillis, attempts }) {
    const k = this.bases.length;
    const start = this.cur;
    const limit = this.attemptTimeout + waitMillis;
    return new Promise((resolve, reject) => {
      const open = new Map(); // attempt number -> its AbortController
      let launched = 0;
      let failed = 0;
      let last;
      let hedgeT;
      let pauseT;
      let settled = false;
      const finish = (ok, v) => {
        if (settled) return;
        settled = true;
        if (hedgeT !== undefined) this.timers.clearTimeout(hedgeT);
        if (pauseT !== undefined) this.timers.clearTimeout(pauseT);
        signal.removeEventListener('abort', onAbort);
        for (const ac of open.values()) ac.abort(new Error('another attempt of the call was answered'));
        open.clear();
        if (ok) resolve(v);
        else reject(v);
      };
      const onAbort = () => finish(false, signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const arm = () => {
        if (hedgeT !== undefined) this.timers.clearTimeout(hedgeT);
        hedgeT = undefined;
        const u = typeof until === 'function' ? until() : until;
        if (u === undefined) return;
        let left;
        try {
          left = Math.max(u - this.clock.now().millis, 0);
        } catch {
          return;
        }
        hedgeT = this.timers.setTimeout(() => {
          hedgeT = undefined;
          // A call whose end went away meanwhile (a hold's first
          // renewal, past the loss) awaits the attempts it has.
          if (settled || (typeof until === 'function' && until() === undefined)) return;
          if (open.size >= attempts) {
            const [oldest, ac] = open.entries().next().value;
            open.delete(oldest);
            ac.abort(new Error('given up for a newer attempt'));
          }
          launch();
        }, Math.min(Math.max(left * ATTEMPT_FRACTION, MIN_RETRY_MILLIS), MAX_TIMER_MILLIS));
      };
      const launch = () => {
        const i = (start + launched) % k;
        const n = ++launched;
        const ac = new AbortController();
        open.set(n, ac);
        arm();
        this.attempt(op, this.bases[i], data, ac.signal, n, limit).then((outcome) => {
          if (settled || !open.has(n)) return;
          open.delete(n);
          if (outcome.reply) {
            this.cur = i;
            finish(true, outcome.reply);
            return;
          }
          if (outcome.final) {
            finish(false, outcome.final);
            return;
          }
          failed++;
          last = outcome.error;
          if (open.size > 0 || pauseT !== undefined) return;
          if (failed >= attempts) {
            if (last instanceof LeaseServiceError) {
              last.attempts = launched;
              finish(false, last);
            } else {
              finish(false, new LeaseServiceError(`lease-fence: ${op} got no answer after ${launched} attempts${lastFailure(last)}`, { code: 'no_answer', attempts: launched, cause: last }));
            }
            return;
          }
          // As send: only an attempt that returns to a coordinator the call
          // already tried waits for the backoff.
          const back = launched + 1 - k;
          const pause = back >= 1 ? this.backoff(back + 1) : 0;
          if (!(pause > 0)) {
            launch();
            return;
          }
          if (hedgeT !== undefined) this.timers.clearTimeout(hedgeT);
          hedgeT = undefined;
          pauseT = this.timers.setTimeout(() => {
            pauseT = undefined;
            if (!settled) launch();
          }, Math.min(pause, MAX_TIMER_MILLIS));
        }, (e) => finish(false, e));
      };
      launch();
    });
  }

  // attempt sends once to the coordinator at base. It returns { reply } for
  // an answer, { final } for a refusal or a failure not worth repeating, or
  // { error } for one that is.
  async attempt(op, base, data, callSignal, n, limit) {
    const url = `${base}/v1/${op}`;
    const attempt = new AbortController();
    const onAbort = () => attempt.abort(callSignal.reason);
    callSignal.addEventListener('abort', onAbort, { once: true });
    const timer = this.timers.setTimeout(() => attempt.abort(new Error(`attempt ${n} timed out after ${durationText(limit)}`)), Math.min(limit, MAX_TIMER_MILLIS));
    let status, text;
    try {
      // Called as a plain function: fetch invoked as a method of another
      // object throws "Illegal invocation" in browsers and Workers.
      const send = this.fetch;
      const res = await send(url, {
        method: 'POST',
        headers: this.headers,
        body: data,
        signal: attempt.signal,
        // A redirect would carry the body, secret included, elsewhere: it
        // is an answer like any other non-200 (final below 500).
        redirect: 'manual',
      });
      status = res.status;
      text = await readBody(res);
    } catch (e) {
      if (attempt.signal.aborted) return { error: attempt.signal.reason };
      const bad = certificateFailure(e);
      if (bad) {
        const what = NAME_MISMATCH_CODES.has(bad.code) ? 'is not for its host' : 'cannot be verified';
        return {
          final: new LeaseServiceError(`lease-fence: ${op}: the TLS certificate of ${base} ${what} (${bad.code}: ${bad.message}); not retried: ` +
            'trust its CA (in Node, NODE_EXTRA_CA_CERTS, or a fetch of your own: see docs/js.md) or use the name it was issued for', { code: 'tls_certificate', attempts: n, cause: e }),
        };
      }
      return { error: e };
    } finally {
      this.timers.clearTimeout(timer);
      callSignal.removeEventListener('abort', onAbort);
    }
    if (status === 200) {
      const reply = parseReply(op, text);
      if (reply === undefined) {
        return { error: new LeaseServiceError(`lease-fence: ${op} got an unreadable answer`, { code: 'bad_reply', status, attempts: n }) };
      }
      return { reply };
    }
    const err = parseError(op, status, text, n);
    if ((status >= 500 || RETRIED_4XX.has(status)) && !FINAL_CODES.has(err.code)) return { error: err };
    return { final: err };
  }
}

// certificateFailure returns { code, message } when e (or one of its
// causes) is a TLS certificate that cannot be verified or is not for the
// host, and undefined otherwise.
function certificateFailure(e) {
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 8; depth++, e = e.cause) {
    if (typeof e.code === 'string' && CERTIFICATE_CODES.has(e.code)) return { code: e.code, message: String(e.message) };
  }
  return undefined;
}

// lastFailure is ": " and what the last attempt met (its message and its
// causes', with their codes), for the message of a call that got no answer,
// as the Go client joins its last error; "" when there was none.
function lastFailure(e) {
  const parts = [];
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 4; depth++, e = e.cause) {
    const text = typeof e.code === 'string' && !String(e.message).includes(e.code) ? `${e.message} (${e.code})` : String(e.message);
    if (!parts.includes(text)) parts.push(text);
  }
  return parts.length ? `: ${parts.join(': ')}` : '';
}
