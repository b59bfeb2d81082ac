/**
 * What a command prints when it cannot start: one line in the operator's words, naming the
 * cause and the fix (docs/OPERATIONS.md, "When it will not start"). Errors arrive here from
 * anywhere in start-up, so they are recognised by name and code rather than by class: the
 * modules that throw them are loaded lazily.
 */

interface SystemError {
  code?: string;
  address?: string;
  port?: number;
  syscall?: string;
}

const VALKEY_FIX =
  'start Valkey there (or check the host, port and firewall), or point sluice at yours with ' +
  'valkey.nodes (--valkey-nodes, SLUICE__valkey__nodes); valkey.mode must match it (standalone or cluster)';

/** The line (or, for an invalid configuration, the lines) to print after "sluice: ". */
export function operatorMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const sys = err as Error & SystemError;
  if (err.name === 'StoreConnectError') return `${err.message}: ${VALKEY_FIX}`;
  if (sys.syscall === 'listen' || sys.syscall === 'bind') {
    const where = `${sys.address ?? '?'}:${sys.port ?? '?'}`;
    if (sys.code === 'EADDRINUSE') {
      return (
        `port ${sys.port} on ${sys.address} is already in use: stop what holds it, or choose ` +
        'another port (listen.port / --port for clients, admin.port / --admin-port for the admin listener)'
      );
    }
    if (sys.code === 'EACCES') {
      return (
        `not allowed to listen on ${where} (ports below 1024 need privileges): use a port ` +
        'above 1023, or grant the process CAP_NET_BIND_SERVICE'
      );
    }
    if (sys.code === 'EADDRNOTAVAIL') {
      return (
        `cannot listen on ${where}: ${sys.address} is not an address of this machine; set ` +
        'listen.host / admin.host (--host) to one of its addresses, or 0.0.0.0 for all'
      );
    }
  }
  return err.message;
}
