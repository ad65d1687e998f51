// A refused run's errors on the input that is wrong (web/ladr_named_input.js): the answer of a
// /prompt that ComfyUI refused is corrected before the frontend draws it, so a DiMOO Canvas
// width off the connected model's grid is drawn on width alone, not on height too. Wraps the
// frontend's api.queuePrompt (the call that posts /prompt; it throws the refusal).
import { api } from "../../scripts/api.js";
import { app } from "../../scripts/app.js";
import { onNamedInputs } from "./ladr_named_input.js";

app.registerExtension({
  name: "comfyui-ladr.input-errors",
  setup() {
    const queuePrompt = api.queuePrompt;
    api.queuePrompt = async function (...args) {
      try {
        const answer = await queuePrompt.apply(this, args);
        onNamedInputs(answer?.node_errors); // accepted, with errors on outputs it will not run
        return answer;
      } catch (err) {
        onNamedInputs(err?.response?.node_errors);
        throw err;
      }
    };
  },
});
