cwlVersion: v1.2
class: CommandLineTool
doc: One tool whose steps set different flags.
baseCommand: uniq
inputs:
  count: {type: boolean?, inputBinding: {prefix: -c}}
  repeated: {type: boolean?, inputBinding: {prefix: -d}}
  f: {type: File, inputBinding: {position: 1}}
stdout: uniq.txt
outputs:
  out: stdout
