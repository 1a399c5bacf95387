// Where a resource's kubeconfig goes among its outputs: a kubeconfig read from a file is kept
// as the file's path and context (Pulumi prints outputs in --debug logs), one given as text
// stays; the stored state gives the same text back, the file read again.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import {
  kubeconfigChanged,
  kubeconfigOfState,
  storedKubeconfig,
  type KubeconfigSource,
} from "../../../provider/dynamic/outputs.js";
import { KubeConfigError } from "../../../engine/kube/index.js";
import { resolveKubeconfig } from "../../../sdk/kubeconfig.js";

const dir = mkdtempSync(join(tmpdir(), "cocoonset-outputs-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const text = [
  "apiVersion: v1",
  "kind: Config",
  "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]",
  "users: [{name: u, user: {token: sekret-token}}]",
  "contexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: u}}]",
  "current-context: a",
  "",
].join("\n");
const file = join(dir, "config");
writeFileSync(file, text);

describe("kubeconfig among the outputs", () => {
  it("keeps a file's path and context, and the text only when no file holds it", () => {
    const cases: [string, KubeconfigSource & { owner: string }, KubeconfigSource][] = [
      [
        "read from a file",
        { kubeconfig: text, kubeconfigFile: file, owner: "o" },
        { kubeconfigFile: file },
      ],
      [
        "a file and a context",
        { kubeconfig: text, kubeconfigFile: file, kubeconfigContext: "b", owner: "o" },
        { kubeconfigFile: file, kubeconfigContext: "b" },
      ],
      ["given as text", { kubeconfig: text, owner: "o" }, { kubeconfig: text }],
    ];
    for (const [name, inputs, expected] of cases) {
      assert.deepEqual(storedKubeconfig(inputs), { ...expected, owner: "o" }, name);
    }
  });

  it("gives back the same text from the stored state, the file read again with its context", () => {
    assert.equal(kubeconfigOfState({ kubeconfig: text }), text);
    assert.equal(kubeconfigOfState({ kubeconfigFile: file }), text);
    const withB = parse(kubeconfigOfState({ kubeconfigFile: file, kubeconfigContext: "b" })) as {
      "current-context": string;
    };
    assert.equal(withB["current-context"], "b");
  });

  it("says which file it could not read, as a kubeconfig error", () => {
    const missing = join(dir, "gone");
    assert.throws(
      () => kubeconfigOfState({ kubeconfigFile: missing }),
      (e: Error) => KubeConfigError.isInstance(e) && e.message.includes(missing),
    );
    assert.throws(
      () => kubeconfigOfState({}),
      (e: Error) => KubeConfigError.isInstance(e),
    );
  });

  it("sees a change of file, of context, or of text, and none when the file's text changed", () => {
    const cases: [KubeconfigSource, KubeconfigSource, boolean][] = [
      [{ kubeconfigFile: file }, { kubeconfig: "other", kubeconfigFile: file }, false],
      [{ kubeconfigFile: file }, { kubeconfig: text, kubeconfigFile: `${file}2` }, true],
      [
        { kubeconfigFile: file },
        { kubeconfig: text, kubeconfigFile: file, kubeconfigContext: "b" },
        true,
      ],
      [{ kubeconfig: text }, { kubeconfig: text }, false],
      [{ kubeconfig: text }, { kubeconfig: "other" }, true],
      // A state from before the file was kept: the text moves out of the outputs.
      [{ kubeconfig: text }, { kubeconfig: text, kubeconfigFile: file }, true],
    ];
    for (const [olds, news, changed] of cases) {
      assert.equal(kubeconfigChanged(olds, news), changed, JSON.stringify([olds, news]));
    }
  });
});

describe("resolving the kubeconfig a component is given", () => {
  it("names the file it read (a path, or $KUBECONFIG when none is given), and no file for text", () => {
    assert.deepEqual(resolveKubeconfig(text, undefined), { text });
    assert.deepEqual(resolveKubeconfig(file, undefined), { text, file });
    // A list as in $KUBECONFIG: kept whole (read again, merged, at destroy); a file that does
    // not exist is skipped, as kubectl skips it.
    const second = join(dir, "second");
    assert.deepEqual(resolveKubeconfig(`${file}:${second}`, undefined), {
      text,
      file: `${file}:${second}`,
    });
    writeFileSync(
      second,
      stringify({
        clusters: [{ name: "d", cluster: { server: "https://127.0.0.1:7443" } }],
        contexts: [{ name: "other", context: { cluster: "d", user: "u" } }],
        "current-context": "other",
      }),
    );
    const merged = resolveKubeconfig(`${file}:${second}`, "other");
    assert.equal(merged.file, `${file}:${second}`);
    assert.match(merged.text, /current-context: other/);
    assert.match(merged.text, /sekret-token/, "the first file's user");
    assert.match(merged.text, /7443/, "the second file's cluster");
    assert.match(
      kubeconfigOfState({ kubeconfigFile: `${file}:${second}`, kubeconfigContext: "other" }),
      /7443/,
    );
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = file;
    try {
      const r = resolveKubeconfig(undefined, "b");
      assert.equal(r.file, file);
      assert.equal(r.context, "b");
      assert.match(r.text, /current-context: b/);
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
    assert.throws(() => resolveKubeconfig(file, "nope"), /no context named "nope"/);
  });
});
