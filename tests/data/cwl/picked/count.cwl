cwlVersion: v1.2
class: CommandLineTool
baseCommand: [grep, -c, A]
successCodes: [0, 1]
inputs:
  f: {type: File, inputBinding: {position: 1}}
stdout: counted.txt
outputs:
  out: stdout
