// The service client's coordinators: the checks of options.baseURL and
// options.baseURLs.
import { InvalidArgumentError } from '../errors.mjs';

const MAX_BASE_URLS = 64;

// baseURLsOf checks the client's coordinators: options.baseURL (one) or
// options.baseURLs (several, tried in turn), not both, each an http: or
// https: URL with a host and at most a path (a prefix the calls' paths are
// appended to); trailing slashes are dropped.
export function baseURLsOf(baseURL, baseURLs) {
  if (baseURL !== undefined && baseURLs !== undefined) {
    throw new InvalidArgumentError('lease-fence: pass options.baseURL or options.baseURLs, not both', 'options.baseURLs');
  }
  let list = [baseURL];
  let name = () => 'options.baseURL';
  if (baseURLs !== undefined) {
    if (!Array.isArray(baseURLs) || baseURLs.length === 0 || baseURLs.length > MAX_BASE_URLS) {
      throw new InvalidArgumentError(`lease-fence: options.baseURLs must be an array of 1 to ${MAX_BASE_URLS} URLs`, 'options.baseURLs');
    }
    list = baseURLs;
    name = (i) => `options.baseURLs[${i}]`;
  }
  return list.map((u, i) => checkBaseURL(u, name(i)));
}

const BASE_URL_EXAMPLE = '"http://127.0.0.1:8787" or "https://leases.example.com/prefix"';

function checkBaseURL(u, name) {
  const bad = (why) => new InvalidArgumentError(`lease-fence: ${name} ${why}`, name);
  if (typeof u !== 'string') {
    throw bad(`must be a string: an http: or https: URL with a host, such as ${BASE_URL_EXAMPLE}`);
  }
  const shown = JSON.stringify(u.length > 200 ? `${u.slice(0, 200)}…` : u);
  let url;
  try {
    url = new URL(u);
  } catch {
    url = undefined;
  }
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(u) && (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))) {
    // "localhost:8787" parses as the scheme "localhost:".
    throw bad(`${shown} has no scheme: write it with http:// or https:// in front, such as ${BASE_URL_EXAMPLE}`);
  }
  if (!url) throw bad(`${shown} is not a URL: it must be an http: or https: URL with a host, such as ${BASE_URL_EXAMPLE}`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw bad(`${shown} has the scheme ${JSON.stringify(url.protocol)}: it must be http: or https:`);
  }
  if (url.hostname === '') throw bad(`${shown} has no host: it must be an http: or https: URL with a host, such as ${BASE_URL_EXAMPLE}`);
  if (url.username !== '' || url.password !== '') {
    // Not shown: the password would be in the message.
    throw bad('has a user name or password in it: a base URL is a scheme, a host and a path; send a token with options.token');
  }
  if (url.search !== '' || url.hash !== '' || u.includes('?') || u.includes('#')) {
    throw bad(`${shown} has a query or a fragment: a base URL is a scheme, a host and a path, to which /v1/acquire and the like are appended`);
  }
  return u.replace(/\/+$/, '');
}
