cwlVersion: v1.2
class: CommandLineTool
doc: A tool whose command is node, running a script the document stages.
requirements:
  InitialWorkDirRequirement:
    listing:
      - entryname: greet.js
        entry: |
          const fs = require("fs");
          fs.writeFileSync("greeting.txt", "hello " + process.argv[2] + "\n");
baseCommand: [node, greet.js]
inputs:
  word:
    type: string
    inputBinding: {position: 1}
outputs:
  greeting:
    type: File
    outputBinding: {glob: greeting.txt}
