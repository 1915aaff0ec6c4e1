cwlVersion: v1.2
class: CommandLineTool
baseCommand: [cat]
inputs:
  ref:
    type: File
    secondaryFiles: [.fai]
    inputBinding: {position: 1}
arguments:
  - {valueFrom: $(inputs.ref.path).fai, position: 2}
stdout: both.txt
outputs:
  out: stdout
