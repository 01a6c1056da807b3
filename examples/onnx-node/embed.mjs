// Embed sentences with an ELMo exported by `contextvec export`, in Node.js with onnxruntime-node,
// and compare with the vectors contextvec computed in Python.
//
//   node embed.mjs MODEL.onnx EXPECTED.json [CHAR_IDS.json]
//
// MODEL.json (written beside MODEL.onnx by the export) gives the character-id contract and the
// input and output names; EXPECTED.json (python_vectors.py) holds the sentences and Python's
// layers; CHAR_IDS.json (examples/onnx/char_ids.json) holds test vectors for the character ids.
// Exits 1 when a value differs by more than the tolerance.

import { readFileSync } from "node:fs";
import ort from "onnxruntime-node";

const TOLERANCE = 1e-5;

// The 50 character ids of one token (docs/onnx.md): begin-word, the token's UTF-8 bytes (at most
// max_bytes_per_token, which may cut a multi-byte character), end-word, then padding; every id is
// the raw value + 1, so that 0 can mark an absent token. A token spelled exactly <S> or </S> is
// the sentence boundary: begin-word, the boundary character, end-word, padding.
export function charIds(token, contract) {
  const width = contract.max_characters_per_token;
  const boundary = { [contract.begin_sentence_token]: contract.begin_sentence_char,
                     [contract.end_sentence_token]: contract.end_sentence_char }[token];
  if (boundary !== undefined) {
    return [contract.begin_word, boundary, contract.end_word,
            ...new Array(width - 3).fill(contract.padding)];
  }
  const bytes = new TextEncoder().encode(token).subarray(0, contract.max_bytes_per_token);
  const ids = new Array(width).fill(contract.padding);
  ids[0] = contract.begin_word;
  bytes.forEach((b, k) => { ids[k + 1] = b + contract.offset; });
  ids[bytes.length + 1] = contract.end_word;
  return ids;
}

// char_ids (batch, time, 50) and mask (batch, time) as int64 tensors; absent tokens are all 0.
function batchInputs(sentences, contract) {
  const width = contract.max_characters_per_token;
  const time = Math.max(0, ...sentences.map((s) => s.length));
  const ids = new BigInt64Array(sentences.length * time * width);
  const mask = new BigInt64Array(sentences.length * time);
  sentences.forEach((sentence, b) => {
    sentence.forEach((token, t) => {
      ids.set(charIds(token, contract).map(BigInt), (b * time + t) * width);
      mask[b * time + t] = 1n;
    });
  });
  return {
    ids: new ort.Tensor("int64", ids, [sentences.length, time, width]),
    mask: new ort.Tensor("int64", mask, [sentences.length, time]),
  };
}

async function main([modelPath, expectedPath, charIdsPath]) {
  if (!modelPath || !expectedPath) {
    console.error("usage: node embed.mjs MODEL.onnx EXPECTED.json [CHAR_IDS.json]");
    process.exit(2);
  }
  const manifest = JSON.parse(readFileSync(modelPath.replace(/\.onnx$/, ".json"), "utf8"));
  const contract = manifest.char_ids;
  if (charIdsPath) {
    const { vectors } = JSON.parse(readFileSync(charIdsPath, "utf8"));
    const wrong = vectors.filter((v) => charIds(v.token, contract).join() !== v.ids.join());
    if (wrong.length) {
      console.error(`character ids differ for ${wrong.map((v) => JSON.stringify(v.token)).join(", ")}`);
      process.exit(1);
    }
    console.log(`character ids: ${vectors.length} test vectors match`);
  }
  const expected = JSON.parse(readFileSync(expectedPath, "utf8"));
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: 2, interOpNumThreads: 1,
  });
  const [idsName, maskName] = manifest.inputs.map((i) => i.name);
  const layersName = manifest.outputs[0].name;
  const { ids, mask } = batchInputs(expected.sentences, contract);
  const output = (await session.run({ [idsName]: ids, [maskName]: mask }))[layersName];
  const [, nLayers, time, dim] = output.dims;

  // output (batch, layers, time, dim) against expected.layers[sentence][layer][token][dim].
  const worst = new Array(nLayers).fill(0);
  expected.sentences.forEach((sentence, b) => {
    for (let k = 0; k < nLayers; k++) {
      for (let t = 0; t < sentence.length; t++) {
        const row = expected.layers[b][k][t];
        const start = ((b * nLayers + k) * time + t) * dim;
        for (let d = 0; d < dim; d++) {
          worst[k] = Math.max(worst[k], Math.abs(output.data[start + d] - row[d]));
        }
      }
    }
  });
  console.log(`sentences: ${expected.sentences.length}, layers: ${nLayers}, dim: ${dim}`);
  console.log(`max |node - python| per layer: ${worst.map((w) => w.toExponential(2)).join(" ")}`);
  if (Math.max(...worst) > TOLERANCE) {
    console.error(`differs from Python by more than ${TOLERANCE.toExponential()}`);
    process.exit(1);
  }
  console.log(`equal to Python within ${TOLERANCE.toExponential()}`);
}

await main(process.argv.slice(2));
