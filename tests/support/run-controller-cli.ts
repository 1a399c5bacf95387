/** Runs `cocoonset controller` in-process with a stand-in deps factory, capturing stderr. */
import { Command } from "commander";
import { registerController, type ControllerDepsFactory } from "../../controller/command.js";

/** What one in-process CLI run produced. */
export interface CliRun {
  exitCode: number;
  stderr: string;
  depsCalled: boolean;
}

/** Parses `controller <args>` and runs its action; restores process.exitCode afterwards. */
export async function runControllerCli(args: string[]): Promise<CliRun> {
  let depsCalled = false;
  const deps: ControllerDepsFactory = async () => {
    depsCalled = true;
    throw new Error("the deps factory must not be reached in this test");
  };
  const program = new Command().exitOverride();
  registerController(program, deps);
  const write = process.stderr.write.bind(process.stderr);
  const saved = process.exitCode;
  let stderr = "";
  process.stderr.write = (chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  };
  try {
    process.exitCode = 0;
    await program.parseAsync(["node", "cocoonset", "controller", ...args]);
    return { exitCode: Number(process.exitCode ?? 0), stderr, depsCalled };
  } finally {
    process.stderr.write = write;
    process.exitCode = saved;
  }
}
