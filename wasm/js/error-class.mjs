// The makings of lease-fence's error classes (errors.mjs, service/errors.mjs):
// plain JavaScript, no WebAssembly, and no export of the package's own.

// named sets cls.prototype.name, which a minifier's renaming leaves alone.
export function named(cls, name) {
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
  return cls;
}

const isObject = (v) => (typeof v === 'object' && v !== null) || typeof v === 'function';

/**
 * errorClass returns a subclass of base named name whose constructor takes
 * (message, options): options is Error's ({ cause }, so that an absent cause
 * stays absent) plus the class's fields. Each field is options[key] when it
 * is defined, else fields[key]; a function in fields maps options[key]
 * (perhaps undefined) and options to the field's value. methods (getters
 * included) go on the prototype, as a class body's would.
 */
export function errorClass(base, name, fields, methods = {}) {
  const cls = class extends base {
    constructor(message, options) {
      super(message, isObject(options) && 'cause' in options ? { cause: options.cause } : undefined);
      for (const [k, d] of Object.entries(fields)) {
        const v = isObject(options) ? options[k] : undefined;
        this[k] = typeof d === 'function' ? d(v, options) : v !== undefined ? v : d;
      }
    }
  };
  Object.defineProperty(cls, 'name', { value: name });
  for (const [k, d] of Object.entries(Object.getOwnPropertyDescriptors(methods))) Object.defineProperty(cls.prototype, k, { ...d, enumerable: false });
  return named(cls, name);
}
