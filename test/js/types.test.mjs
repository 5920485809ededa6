// The .d.ts files against the run time. The TypeScript compiler reads
// lease-fence.d.ts and service-client.d.ts; for every exported class the test
// takes each constructor parameter (name, optional or not, and for an options
// object each property and its type) and checks that the class does what the
// declaration says:
// - error classes: (message, options) sets .message, .cause exactly as Error
//   does, and every declared field from the options by name; a string in
//   place of the options where the declaration allows one; no arguments when
//   both are optional;
// - the other classes: each required parameter or option property is
//   required (leaving it out throws InvalidArgumentError), each optional one
//   may be left out, and each declared option property is read (a value of
//   the wrong type is refused naming it);
// - a class with a private constructor cannot be constructed.
// It also checks that the names each module exports are the names its
// declaration exports, in both directions.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import * as lf from 'lease-fence';
import * as sc from 'lease-fence/service-client';

const ts = createRequire(import.meta.url)('typescript');
const dir = fileURLToPath(new URL('../../wasm/js/', import.meta.url));
const files = { 'lease-fence': `${dir}lease-fence.d.ts`, 'lease-fence/service-client': `${dir}service-client.d.ts` };
const runtime = { 'lease-fence': lf, 'lease-fence/service-client': sc };

const program = ts.createProgram(Object.values(files), { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, types: [] });
const checker = program.getTypeChecker();

// props lists the properties of an options type (the object constituents of
// a union or intersection), and whether the type also admits a string.
function props(type) {
  const parts = type.isUnion() ? type.types : [type];
  const objects = parts.filter((t) => !(t.flags & (ts.TypeFlags.StringLike | ts.TypeFlags.Undefined | ts.TypeFlags.Null)));
  const out = new Map();
  for (const t of objects) {
    for (const p of checker.getPropertiesOfType(t)) {
      const decl = p.valueDeclaration ?? p.declarations?.[0];
      out.set(p.name, {
        optional: (p.flags & ts.SymbolFlags.Optional) !== 0,
        type: checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(p, decl)),
      });
    }
  }
  return { props: out, string: parts.some((t) => t.flags & ts.TypeFlags.StringLike) };
}

// declared reads a module's exports: classes with their constructor
// parameters and instance properties, and the names of everything else.
function declared(file) {
  const source = program.getSourceFile(file);
  const module = checker.getSymbolAtLocation(source);
  const classes = new Map();
  const values = [];
  for (const sym of checker.getExportsOfModule(module)) {
    const s = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
    if (!(s.flags & ts.SymbolFlags.Value)) continue;
    values.push(sym.name);
    if (!(s.flags & ts.SymbolFlags.Class)) continue;
    const decl = s.valueDeclaration;
    const ctor = decl.members.find((m) => ts.isConstructorDeclaration(m));
    const isPrivate = ctor?.modifiers?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword) ?? false;
    const sig = checker.getTypeOfSymbolAtLocation(s, decl).getConstructSignatures()[0];
    const params = sig.getParameters().map((p) => {
      const pd = p.valueDeclaration;
      const type = checker.getTypeOfSymbolAtLocation(p, pd);
      return { name: p.name, optional: checker.isOptionalParameter(pd), type: checker.getNonNullableType(type), ...props(checker.getNonNullableType(type)) };
    });
    const fields = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(s))
      .filter((p) => !(p.flags & ts.SymbolFlags.Method) && p.valueDeclaration && !ts.isMethodDeclaration(p.valueDeclaration))
      .map((p) => p.name);
    classes.set(sym.name, { isPrivate, params, fields, declaredCtor: ctor !== undefined });
  }
  return { classes, values };
}

// sample makes a value of a declared type, distinct per name.
let counter = 0;
function sample(name, type) {
  counter++;
  if (type.isUnion() && type.types.every((t) => t.isStringLiteral())) return type.types[0].value;
  if (type.isStringLiteral()) return type.value;
  if (type.flags & ts.TypeFlags.StringLike) return `${name}-${counter}`;
  if (type.flags & ts.TypeFlags.NumberLike) return 100 + counter;
  if (type.flags & ts.TypeFlags.BooleanLike) return true;
  return { sample: name, n: counter };
}

for (const [specifier, file] of Object.entries(files)) {
  const { classes, values } = declared(file);
  const ns = runtime[specifier];

  describe(`${specifier}: the .d.ts matches the run time`, () => {
    test('the module exports exactly the values the declaration exports', () => {
      assert.deepEqual(Object.keys(ns).sort(), [...values].sort());
    });

    for (const [name, decl] of classes) {
      const C = ns[name];
      const isError = typeof C === 'function' && C.prototype instanceof Error;

      if (decl.isPrivate) {
        test(`${name}: private constructor, and new throws`, () => {
          assert.throws(() => new C());
        });
        continue;
      }

      if (isError) {
        test(`${name}(${decl.params.map((p) => p.name + (p.optional ? '?' : '')).join(', ')}): message, cause and each declared field`, () => {
          assert.deepEqual(decl.params.map((p) => p.name), ['message', 'options'], 'error classes take (message, options)');
          const [message, options] = decl.params;
          const opts = {};
          for (const [p, d] of options.props) opts[p] = p === 'cause' ? new Error('the cause') : sample(p, d.type);
          assert.ok(options.props.has('cause'), 'options has cause');
          const e = new C('m', opts);
          assert.ok(e instanceof C && e instanceof lf.LeaseFenceError && e instanceof Error);
          assert.equal(e.name, name);
          assert.equal(e.message, 'm');
          assert.equal(e.cause, opts.cause);
          for (const [p] of options.props) {
            if (p !== 'cause') assert.equal(e[p], opts[p], `options.${p} sets .${p}`);
          }
          for (const f of decl.fields) {
            if (!['message', 'name', 'stack', 'cause'].includes(f)) assert.ok(f in e && e[f] !== undefined, `.${f} is set`);
          }
          // No cause given: none set, as with Error.
          const { cause: _, ...rest } = opts;
          assert.equal(Object.hasOwn(new C('m', rest), 'cause'), false);
          if (options.string) {
            const own = [...options.props].filter(([p, d]) => p !== 'cause' && d.type.flags & ts.TypeFlags.StringLike);
            assert.equal(own.length, 1, 'a string in place of the options names one field');
            assert.equal(new C('m', 'given')[own[0][0]], 'given');
          }
          if (message.optional && options.optional) {
            const bare = new C();
            assert.equal(bare.message, '');
            for (const f of decl.fields) {
              if (!['message', 'name', 'stack', 'cause'].includes(f)) assert.ok(f in bare, `.${f} is there without options`);
            }
          }
        });
        continue;
      }

      test(`${name}(${decl.params.map((p) => p.name + (p.optional ? '?' : '')).join(', ')}): required and optional parameters and options as declared`, () => {
        assert.ok(validArgs[name], `validArgs below has ${name}`);
        const { args: valid, unused = [], dependent = [] } = validArgs[name];
        const args = valid();
        assert.equal(args.length, decl.params.length, 'one valid argument per declared parameter');
        decl.params.forEach((p, i) => {
          if (p.props.size > 0 && !p.string) {
            assert.deepEqual(Object.keys(args[i]).concat(unused).sort(), [...p.props.keys()].sort(),
              `validArgs.${name} uses every option ${p.name} declares (a new option must be added there)`);
          }
        });
        assert.ok(new C(...valid()) instanceof C);
        decl.params.forEach((p, i) => {
          const without = valid().slice(0, i);
          if (p.optional) assert.ok(new C(...without) instanceof C, `${p.name} may be left out`);
          else assert.throws(() => new C(...without, ...valid().slice(i + 1)), lf.InvalidArgumentError, `${p.name} is required`);
          if (p.props.size === 0) return;
          for (const [key, d] of p.props) {
            const a = valid();
            if (!(key in a[i])) continue; // an alternative the valid arguments do not use
            delete a[i][key];
            if (dependent.includes(key)) continue; // optional or not depending on other options
            if (d.optional) assert.ok(new C(...a) instanceof C, `${p.name}.${key} may be left out`);
            else assert.throws(() => new C(...a), lf.InvalidArgumentError, `${p.name}.${key} is required`);
            const b = valid();
            b[i][key] = Symbol('wrong');
            assert.throws(() => new C(...b), (e) => e instanceof lf.InvalidArgumentError && e.argument.includes(key), `${p.name}.${key} is read and checked`);
          }
        });
      });
    }
  });
}

// Arguments that make each non-error class, using every option the
// declaration lists (checked above, so a new option must be added here).
// unused: options left out because they exclude others that are used;
// dependent: options whose being required depends on others (as their
// declaration's comment says), so leaving them out is not checked.
const validArgs = {
  LeaseCoordinator: { args: () => [{ clock: lf.createManualClock('c'), ttlMillis: 100, startFence: 3 }] },
  LeaseClient: { args: () => [{ clock: lf.createManualClock('a'), holderId: 'a', clockSkewMillis: 5 }] },
  FenceGate: { args: () => ['r', { initialFloor: 2, maxRejections: 5, exclusive: true }] },
  LeaseServiceClient: {
    args: () => [{
      baseURL: 'http://127.0.0.1:1', holderId: 'h', clock: lf.createManualClock('h'), clockSkewMillis: 1,
      fetch: async () => new Response('{}'), transport: 'fetch', attempts: 2, attemptTimeoutMillis: 100, timeoutMillis: 1000, backoff: () => 1, token: 't0ken',
      maxWaitMillis: 5000, timers: { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h) },
    }],
    unused: ['leaseClient', 'baseURLs', 'agent'],
    dependent: ['holderId', 'baseURL'],
  },
};
