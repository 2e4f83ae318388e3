// Checks Kubernetes manifests offline (no cluster): every document against the API schemas of
// kubernetes-models (the OpenAPI schemas of the Kubernetes API, checked with ajv), then what a
// troupe job needs of them (docs/cluster.md#kubernetes). Prints one line per document; exits 1
// naming the file, the document and the flaw.
//
//   node validate.mjs FILE.yaml...      (tools/k8s/validate installs the modules first)
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import * as core from "kubernetes-models/v1";
import * as batch from "kubernetes-models/batch/v1";
import * as apps from "kubernetes-models/apps/v1";

const models = {
  "v1/Service": core.Service,
  "v1/Secret": core.Secret,
  "v1/PersistentVolumeClaim": core.PersistentVolumeClaim,
  "v1/ConfigMap": core.ConfigMap,
  "apps/v1/StatefulSet": apps.StatefulSet,
  "batch/v1/Job": batch.Job,
};

const stopSeconds = 25; // timeouts.stop_s's default: the pods' grace must exceed it

function envOf(container) {
  return Object.fromEntries((container.env || []).map((e) => [e.name, e.value ?? e.valueFrom]));
}

// The manifest a troupe container names with --manifest, from a ConfigMap of this file mounted at
// its directory: [flaws, the parsed manifest or null].
function manifestOf(command, container, pod, configMaps) {
  const path = command.match(/--manifest\s+(\S+)/)?.[1];
  if (!path) return [[], null];
  const where = `containers[${container.name}]: --manifest ${path}`;
  if (!path.startsWith("/")) return [[`${where}: expected an absolute path (a ConfigMap's key under its mount)`], null];
  const directory = path.slice(0, path.lastIndexOf("/"));
  const mount = (container.volumeMounts || []).find((m) => m.mountPath.replace(/\/$/, "") === directory);
  const volume = mount && (pod.volumes || []).find((v) => v.name === mount.name);
  const configMap = volume?.configMap && configMaps.get(volume.configMap.name);
  if (!configMap) return [[`${where}: expected a ConfigMap of this file mounted at ${directory}`], null];
  const text = configMap.data?.[path.slice(path.lastIndexOf("/") + 1)];
  if (text === undefined) return [[`${where}: ConfigMap ${configMap.metadata.name} has no key ${path.slice(path.lastIndexOf("/") + 1)}`], null];
  try {
    return [[], JSON.parse(text)];
  } catch (error) {
    return [[`${where}: ConfigMap ${configMap.metadata.name}: not JSON: ${error.message}`], null];
  }
}

// With failover a failed pod must be started again to rejoin: a Job that fails at its first pod
// failure stops every pod (backoffLimit 0); backoffLimitPerIndex needs restartPolicy Never.
function failoverFlaws(spec, pod, manifest) {
  if (!manifest?.failover) return [];
  const flaws = [];
  if (!Array.isArray(manifest.failover.etcd) || manifest.failover.etcd.length === 0)
    flaws.push("the manifest's failover.etcd: expected the etcd client URLs");
  const limit = spec.backoffLimitPerIndex !== undefined ? "backoffLimitPerIndex" : "backoffLimit";
  if ((spec[limit] ?? 6) < 1)
    flaws.push(`spec.${limit}: expected at least 1 with failover (a failed pod is started again and rejoins; at 0 its failure ends the Job)`);
  if (spec.backoffLimitPerIndex !== undefined && pod.restartPolicy !== "Never")
    flaws.push("spec.template.spec.restartPolicy: expected Never (backoffLimitPerIndex needs it)");
  return flaws;
}

// What troupe's environment path (troupe node --from-env) needs of an Indexed Job and its Service.
function checkTroupeJob(job, services, configMaps) {
  const spec = job.spec;
  const pod = spec.template.spec;
  const flaws = [];
  if (spec.completionMode !== "Indexed") flaws.push("spec.completionMode: expected Indexed (JOB_COMPLETION_INDEX is the node)");
  if (spec.parallelism !== spec.completions) flaws.push("spec.parallelism: expected it to equal spec.completions (all nodes at once)");
  if (!services.has(pod.subdomain)) flaws.push(`spec.template.spec.subdomain: expected the name of a headless Service here, got ${pod.subdomain}`);
  if (!((pod.terminationGracePeriodSeconds ?? 30) > stopSeconds))
    flaws.push(`spec.template.spec.terminationGracePeriodSeconds: expected more than timeouts.stop_s (${stopSeconds})`);
  for (const container of pod.containers) {
    const env = envOf(container);
    const command = [...(container.command || []), ...(container.args || [])].join(" ");
    if (!command.includes("troupe node --from-env")) continue;
    if (String(env.TROUPE_NODES) !== String(spec.completions))
      flaws.push(`containers[${container.name}].env.TROUPE_NODES: expected ${spec.completions} (spec.completions), got ${env.TROUPE_NODES}`);
    const template = env.TROUPE_HOST_TEMPLATE || "";
    if (!template.includes("{index}") || !template.startsWith(`${job.metadata.name}-{index}.${pod.subdomain}`))
      flaws.push(`containers[${container.name}].env.TROUPE_HOST_TEMPLATE: expected "${job.metadata.name}-{index}.${pod.subdomain}…" (the pods' DNS names), got "${template}"`);
    if (!env.TROUPE_JOB_SECRET) flaws.push(`containers[${container.name}].env.TROUPE_JOB_SECRET: expected one (every node carries it)`);
    const [manifestFlaws, manifest] = manifestOf(command, container, pod, configMaps);
    flaws.push(...manifestFlaws, ...failoverFlaws(spec, pod, manifest));
  }
  return flaws;
}

let failed = false;
for (const file of process.argv.slice(2)) {
  const documents = parseAllDocuments(readFileSync(file, "utf8"));
  const objects = [];
  documents.forEach((document, index) => {
    const where = `${file}: document ${index + 1}`;
    if (document.errors.length > 0) {
      console.error(`${where}: not YAML: ${document.errors[0].message}`);
      failed = true;
      return;
    }
    const object = document.toJS();
    const Model = models[`${object.apiVersion}/${object.kind}`];
    if (!Model) {
      console.error(`${where}: ${object.apiVersion} ${object.kind}: no schema here (known: ${Object.keys(models).join(", ")})`);
      failed = true;
      return;
    }
    try {
      new Model(object).validate();
      objects.push(object);
      console.log(`${where}: ${object.kind} ${object.metadata.name}: valid`);
    } catch (error) {
      console.error(`${where}: ${object.kind} ${object.metadata?.name}: ${error.message}`);
      failed = true;
    }
  });
  const services = new Set(objects.filter((o) => o.kind === "Service" && o.spec.clusterIP === "None").map((o) => o.metadata.name));
  const configMaps = new Map(objects.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o]));
  for (const job of objects.filter((o) => o.kind === "Job")) {
    for (const flaw of checkTroupeJob(job, services, configMaps)) {
      console.error(`${file}: Job ${job.metadata.name}: ${flaw}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
