/** The deepest nesting a tool's arguments may have; no operation’s input nests past 4 levels; below the body guard’s 32 so MCP answers in JSON-RPC. */
export const MAX_ARGUMENT_DEPTH = 16;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Depth of a parsed JSON value, measured without recursion (so a hostile depth cannot overflow the stack). */
function depthExceeds(root: unknown, limit: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value: root, depth: 0 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= limit) return true;
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/**
 * Refuses `tools/call` messages whose arguments are not an object or nest too deep, before the MCP SDK
 * parses them: JSON-RPC invalid params (-32602) instead of an internal error from deep inside the SDK.
 */
export function checkArguments(body: unknown): { id: unknown; message: string } | undefined {
  for (const message of Array.isArray(body) ? body : [body]) {
    if (!isPlainObject(message) || message.method !== 'tools/call') continue;
    const params = message.params;
    if (!isPlainObject(params)) return { id: message.id, message: 'params must be an object with name and arguments' };
    const args = params.arguments;
    if (args !== undefined && !isPlainObject(args)) return { id: message.id, message: 'arguments must be a JSON object' };
    if (depthExceeds(args, MAX_ARGUMENT_DEPTH)) return { id: message.id, message: `arguments nest deeper than ${MAX_ARGUMENT_DEPTH} levels` };
  }
  return undefined;
}
