/**
 * The supervisor as a process of its own, started and stopped by `cocoonset-dev cluster up` and
 * `down` like the cluster's other components: `node supervisor-main.js --state-dir DIR`. It
 * looks at the components every second and logs one line per death and per restart to
 * stdout (its log); SIGTERM stops it.
 */
import { superviseOnce, type Memory } from "./supervisor.js";

const i = process.argv.indexOf("--state-dir");
const stateDir = i > 0 ? process.argv[i + 1] : undefined;
if (!stateDir) {
  process.stderr.write("supervisor: [--state-dir] is required\n");
  process.exit(2);
}
const say = (line: string) =>
  process.stdout.write(`${new Date().toISOString()} supervisor: ${line}\n`);
const memory = new Map<string, Memory>();
process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
say(`watching the components of ${stateDir}`);
const timer = setInterval(() => {
  if (!superviseOnce(stateDir, process.pid, memory, Date.now(), say)) {
    say("the state file is gone or names another supervisor; stopping");
    clearInterval(timer);
  }
}, 1000);
