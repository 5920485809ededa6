// A fresh node process for the tests that need one (one process holds one
// instance of the library), without loading the library here.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../../', import.meta.url));

// run evaluates code as an ES module in a fresh node from the repository root
// (so 'lease-fence' resolves to this package) and returns the JSON it prints
// last.
export function run(code, flags = []) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...flags, '--input-type=module', '-e', code], { cwd: root, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      const lines = stdout.trim().split('\n');
      resolve(JSON.parse(lines[lines.length - 1]));
    });
  });
}
