// How the runtime (runtime.mjs) gets its WebAssembly: from the source given
// to init(), or, when none is given, from lease-fence.wasm beside this file.
// Nothing here imports from node: (the browser entry includes this file); on file:
// URLs it reads the file through process.getBuiltinModule where the host has
// it (Node 20.16+, Deno, Bun) and through fetch otherwise (Deno and Bun fetch
// file: URLs).

/**
 * The wasm beside this module. Written as a literal new URL(…, import.meta.url)
 * so that bundlers which understand the pattern (webpack 5, Vite, Parcel)
 * copy the file and rewrite the URL.
 */
export function defaultWasmURL() {
  return new URL('./lease-fence.wasm', import.meta.url);
}

/**
 * What to do when a file of the package is not there (lease-fence.wasm,
 * wasm_exec.mjs): both are build outputs that git ignores.
 */
export const MISSING_FIX = 'in a checkout of lease-fence, build it with `make build-wasm` (it needs Go); a package made by npm pack always has it ' +
  '(reinstall it); a bundle must copy lease-fence.wasm beside the module or pass the wasm to init() (docs/js.md, "Using it in your build")';

// missing adds MISSING_FIX to message when e says a file is not there.
function missing(message, e) {
  return e?.code === 'ENOENT' ? `${message}: the file is not there; ${MISSING_FIX}` : message;
}

function describe(v) {
  if (v === null) return 'null';
  if (typeof v === 'object') return v.constructor?.name ?? 'an object';
  return typeof v;
}

/**
 * Compiles (unless it is already a WebAssembly.Module) and instantiates
 * source with imports; returns { module, instance }. errors.invalid(message)
 * and errors.failed(message, cause) make the errors it throws.
 */
export async function instantiate(source, imports, errors) {
  if (source === undefined) source = defaultWasmURL();
  if (source !== null && (typeof source === 'object' || typeof source === 'function') && typeof source.then === 'function') {
    try {
      source = await source;
    } catch (e) {
      throw errors.failed(missing(`lease-fence: getting the wasm failed: ${e?.message ?? e}`, e), e);
    }
  }
  if (source instanceof WebAssembly.Module) {
    return { module: source, instance: await WebAssembly.instantiate(source, imports) };
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return compileBytes(source, imports, errors, 'the given bytes');
  }
  // URLs before Responses: in Node, the first mention of Response loads
  // its fetch implementation, which costs more than compiling the wasm.
  if (typeof source === 'string' || source instanceof URL) {
    return fromURL(source, imports, errors);
  }
  if (typeof Response === 'function' && source instanceof Response) {
    return fromResponse(source, imports, errors);
  }
  throw errors.invalid(`lease-fence: init takes a URL, a URL string, a Response, bytes (ArrayBuffer or a typed array) or a WebAssembly.Module (or a promise of one), not ${describe(source)}`);
}

async function compileBytes(bytes, imports, errors, what) {
  try {
    return await WebAssembly.instantiate(bytes, imports);
  } catch (e) {
    throw errors.failed(`lease-fence: compiling ${what} failed: ${e.message}`, e);
  }
}

async function fromURL(url, imports, errors) {
  let parsed;
  try {
    parsed = new URL(url, globalThis.location?.href);
  } catch (e) {
    throw errors.invalid(`lease-fence: ${JSON.stringify(String(url))} is not a URL (pass a file: URL or the bytes to load a file by path)`);
  }
  if (parsed.protocol === 'file:') {
    const fs = globalThis.process?.getBuiltinModule?.('node:fs');
    if (fs) {
      let bytes;
      try {
        bytes = await fs.promises.readFile(parsed);
      } catch (e) {
        throw errors.failed(missing(`lease-fence: reading ${parsed} failed: ${e.message}`, e), e);
      }
      return compileBytes(bytes, imports, errors, parsed.href);
    }
  }
  let response;
  try {
    response = await fetch(parsed);
  } catch (e) {
    throw errors.failed(`lease-fence: fetching ${parsed} failed: ${e.message}`, e);
  }
  return fromResponse(response, imports, errors);
}

async function fromResponse(response, imports, errors) {
  if (!response.ok) {
    const hint = response.status === 404 && /lease-fence\.wasm$/.test(new URL(response.url || 'x:', 'x:').pathname) ? `; ${MISSING_FIX}` : '';
    throw errors.failed(`lease-fence: fetching ${response.url || 'the wasm'} failed: ${response.status} ${response.statusText}${hint}`);
  }
  if (typeof WebAssembly.instantiateStreaming === 'function') {
    try {
      return await WebAssembly.instantiateStreaming(response.clone(), imports);
    } catch {
      // Most often a server that does not send application/wasm; compile
      // from the bytes instead.
    }
  }
  let bytes;
  try {
    bytes = await response.arrayBuffer();
  } catch (e) {
    throw errors.failed(`lease-fence: reading ${response.url || 'the response'} failed: ${e.message}`, e);
  }
  return compileBytes(bytes, imports, errors, response.url || 'the response');
}

/**
 * The source of the Go runtime's random bytes (go.getRandomValues, see
 * wasm_exec.mjs), or undefined for crypto.getRandomValues. In Node it reads
 * the operating system's /dev/urandom with node:fs: Node builds its WebCrypto
 * object on the first read of globalThis.crypto, the costliest single step of
 * a cold import (see docs/wasm.md), and Go needs only a few dozen bytes, as it
 * starts. Deno, Bun and browsers have crypto ready, so they keep it; so does
 * Node where /dev/urandom cannot be read (Windows, a permission model).
 */
export function randomSource() {
  const proc = globalThis.process;
  if (proc?.release?.name !== 'node' || proc.platform === 'win32' || proc.versions?.bun !== undefined || globalThis.Deno !== undefined) {
    return undefined;
  }
  const fs = proc.getBuiltinModule?.('node:fs');
  if (!fs) return undefined;
  return (bytes) => {
    try {
      const fd = fs.openSync('/dev/urandom', 'r');
      try {
        for (let n = 0; n < bytes.length;) {
          const got = fs.readSync(fd, bytes, n, bytes.length - n, null);
          if (!(got > 0)) throw new Error('/dev/urandom: short read');
          n += got;
        }
      } finally {
        fs.closeSync(fd);
      }
    } catch {
      globalThis.crypto.getRandomValues(bytes);
    }
  };
}
