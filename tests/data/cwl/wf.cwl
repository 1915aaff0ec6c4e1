cwlVersion: v1.2
class: Workflow
inputs:
  text: File
outputs:
  counted:
    type: File
    outputSource: count/out
steps:
  sort:
    run:
      class: CommandLineTool
      baseCommand: sort
      inputs:
        f: { type: File, inputBinding: { position: 1 } }
      outputs:
        out: { type: stdout }
      stdout: sorted.txt
    in: { f: text }
    out: [out]
  count:
    run:
      class: CommandLineTool
      baseCommand: [wc, -l]
      inputs:
        f: { type: File, inputBinding: { position: 1 } }
      outputs:
        out: { type: stdout }
      stdout: count.txt
    in: { f: sort/out }
    out: [out]
