cwlVersion: v1.2
class: Workflow
doc: >
  Two steps of one grep tool, one that matches and one that does not (exit 1, a success),
  and a grep that does not match run by sh -c.
inputs:
  n: int
outputs:
  some: {type: File, outputSource: find-some/found}
  none: {type: File, outputSource: find-none/found}
steps:
  count:
    run:
      class: CommandLineTool
      baseCommand: seq
      inputs:
        n: {type: int, inputBinding: {position: 1}}
      stdout: nums.txt
      outputs:
        nums: stdout
    in: {n: n}
    out: [nums]
  find-some:
    run: find.cwl
    in: {f: count/nums, pattern: {default: "2"}}
    out: [found]
  find-none:
    run: find.cwl
    in: {f: count/nums, pattern: {default: "7"}}
    out: [found]
  find-shelled:
    run: shfind.cwl
    in: {f: count/nums}
    out: []
