/**
 * Freezes plain objects and arrays, all the way down. Anything else (URL, Set,
 * Map, BlockList, the key bytes) is left as built: config holds only data, so
 * there is no live object in it that freezing could break.
 */
export function deepFreeze<T>(o: T): T {
  if ((Array.isArray(o) || isPlainObject(o)) && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}

function isPlainObject(o: unknown): o is object {
  if (typeof o !== 'object' || o === null) return false;
  const proto: unknown = Object.getPrototypeOf(o);
  return proto === Object.prototype || proto === null;
}
